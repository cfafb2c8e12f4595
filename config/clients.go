package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Clients is the [clients] table: where client names come from (spec
// section 15). The query path reads them through package clients.
type Clients struct {
	HostsFiles    []string       `toml:"hosts_files"`    // /etc/hosts format: ADDRESS NAME…
	LeasesFiles   []string       `toml:"leases_files"`   // dnsmasq (or ISC dhcpd) lease files
	ReverseLookup bool           `toml:"reverse_lookup"` // PTR through the forward zone covering the reverse name
	Static        []StaticClient `toml:"static"`         // [[clients.static]], first in precedence
}

// StaticClient is one [[clients.static]] entry.
type StaticClient struct {
	Name      string   `toml:"name"`      // a host name: letters, digits, '-', '_', dots between labels
	Addresses []string `toml:"addresses"` // IP addresses, IPv4 or IPv6

	// Addrs is Addresses parsed by validation (Load, Parse, Validate),
	// read from no key.
	Addrs []netip.Addr `toml:"-"`
}

// defaultClients is [clients]' default: no files, PTR lookups on.
func defaultClients() Clients { return Clients{ReverseLookup: true} }

// clients checks [clients] and sets each static entry's Addrs.
func (ck *checker) clients(c *Clients) {
	// "key = []" and no key are one configuration.
	if len(c.HostsFiles) == 0 {
		c.HostsFiles = nil
	}
	if len(c.LeasesFiles) == 0 {
		c.LeasesFiles = nil
	}
	ck.clientFiles("clients.hosts_files", c.HostsFiles)
	ck.clientFiles("clients.leases_files", c.LeasesFiles)
	names := make(firsts[string], len(c.Static))
	owner := make(map[netip.Addr]string, len(c.Static))
	for i := range c.Static {
		s := &c.Static[i]
		s.Addrs = nil
		p := fmt.Sprintf("clients.static[%d]", i)
		if msg := clientNameProblem(s.Name); msg != "" {
			ck.add(p+".name", "%s", msg)
		} else if j, dup := names.add(strings.ToLower(s.Name), i); dup {
			ck.add(p+".name", "duplicate name %q (also clients.static[%d].name); list every address in one entry", s.Name, j)
		}
		if len(s.Addresses) == 0 {
			ck.add(p+".addresses", "at least one address is required")
		}
		for k, a := range s.Addresses {
			ap := fmt.Sprintf("%s.addresses[%d]", p, k)
			ip, err := netip.ParseAddr(a)
			switch {
			case err != nil:
				ck.add(ap, "%q is not an IP address", a)
				continue
			case ip.Zone() != "":
				ck.add(ap, "%q has a zone; write the address without it (%s)", a, ip.WithZone(""))
				continue
			case ip.Is4In6():
				ck.add(ap, "%q is an IPv4-mapped IPv6 address; clients with such addresses are named as IPv4, so write it as %s", a, ip.Unmap())
				continue
			}
			if other, dup := owner[ip]; dup {
				ck.add(ap, "%s is also %s's address; an address has one static name", ip, other)
				continue
			}
			owner[ip] = p
			s.Addrs = append(s.Addrs, ip)
		}
	}
}

// clientFiles checks a list of file paths: none empty, none twice.
func (ck *checker) clientFiles(path string, files []string) {
	seen := make(map[string]int, len(files))
	for i, f := range files {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch j, dup := seen[filepath.Clean(f)]; {
		case f == "":
			ck.add(p, "must not be empty")
		case dup:
			ck.add(p, "%q is also %s[%d]", f, path, j)
		default:
			seen[filepath.Clean(f)] = i
		}
	}
}

// clientNameProblem says what is wrong with a static client's name, or
// returns "": names as lease and hosts files hold them.
func clientNameProblem(s string) string {
	if s == "" {
		return "is required"
	}
	t := strings.TrimSuffix(s, ".")
	if t == "" || len(t) > 253 {
		return fmt.Sprintf("%q is not a host name", s)
	}
	for label := range strings.SplitSeq(t, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Sprintf("%q is not a host name (empty or over-long label)", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("%q is not a host name (letters, digits, '-' and '_' only)", s)
			}
		}
	}
	return ""
}

// resolveClientFiles makes relative hosts_files and leases_files paths
// relative to dir, the configuration file's directory, as ca_file is.
func (c *Clients) resolveFiles(dir string) {
	for _, list := range [][]string{c.HostsFiles, c.LeasesFiles} {
		for i, f := range list {
			if f != "" && !filepath.IsAbs(f) {
				list[i] = filepath.Join(dir, f)
			}
		}
	}
}

// clientFileWarnings names the hosts and leases files that are not there
// now: nxdnsd runs without their names, and reads them when they appear.
func (c *Clients) fileWarnings() Problems {
	var ws Problems
	for _, l := range []struct {
		path  string
		files []string
	}{{"clients.hosts_files", c.HostsFiles}, {"clients.leases_files", c.LeasesFiles}} {
		for i, f := range l.files {
			fi, err := os.Stat(f)
			msg := ""
			switch {
			case errors.Is(err, fs.ErrNotExist):
				msg = fmt.Sprintf("%q does not exist; its names are read when it appears", f)
			case err != nil:
				msg = fmt.Sprintf("%q cannot be read: %v", f, err)
			case !fi.Mode().IsRegular():
				msg = fmt.Sprintf("%q is not a regular file; only a regular file is read", f)
			}
			if msg != "" {
				ws = append(ws, Problem{Path: fmt.Sprintf("%s[%d]", l.path, i), Message: oneLine(warningPrefix + msg)})
			}
		}
	}
	return ws
}
