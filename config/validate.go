package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Validate checks c against every rule of spec section 2 and returns
// Problems listing all that fail, in the order of the file's sections, or
// nil. Load and Parse have already called it; it is exported for
// configurations built in code.
//
// Each value is parsed here, once, and what it parses to is kept beside it
// for the rest of nxdnsd: every Upstream's Addr, DialIP and RootCAs (it
// reads every ca_file) and every LocalRecord's RR. When Validate returns
// nil they are all set; a value with a problem leaves its parsed field at
// the zero value.
//
// It accepts values in their written or their normalised form (see Parse),
// so that a name is reported as the user wrote it.
func (c *Config) Validate() error {
	if ps := c.check(); len(ps) > 0 {
		return ps
	}
	return nil
}

// checker collects problems; its methods never stop at the first.
type checker struct {
	problems Problems
}

func (ck *checker) add(path, format string, args ...any) {
	ck.problems = append(ck.problems, Problem{Path: path, Message: oneLine(fmt.Sprintf(format, args...))})
}

// firsts remembers the entries of a table by a key, so that a duplicate
// names the first entry with that key.
type firsts[K comparable] map[K]int

// add remembers key as entry i's, unless an earlier entry j has it: then
// it reports that one.
func (f firsts[K]) add(key K, i int) (j int, dup bool) {
	if j, dup = f[key]; !dup {
		f[key] = i
	}
	return j, dup
}

func (c *Config) check() Problems {
	var ck checker
	listens := ck.server(c.Server)
	c.Server.AllowPrefixes = ck.allow(c.Server.Allow)
	ck.rebind(&c.Server)
	ck.encrypted(&c.Server, listens)
	ck.policy(c.Upstream)
	ck.upstreams(c.Upstreams)
	ck.bootstrap(&c.Upstream, c.Server.Listen, hostAddrs)
	ck.selfUpstreams(c.Upstreams, c.Server.Listen, hostAddrs)
	ck.forwardZones(c.ForwardZones)
	ck.localRecords(c.LocalRecords)
	ck.cache(c.Cache)
	ck.queryLogPath(c.QueryLog.Path)
	ck.history(c.History)
	if l := c.Admin.Listen; l != "" {
		if ap, ok := ck.bindAddr("admin.listen", l); ok && ap.Port() != 0 {
			if i, clash := listens[ap]; clash {
				ck.add("admin.listen", "%q is also server.listen[%d]", l, i)
			}
		}
	}
	ck.inRange("admin.recent_queries", c.Admin.RecentQueries, 0, MaxRecentQueries)
	ck.adminHosts(c.Admin.Hosts)
	ck.clients(&c.Clients)
	ck.blocking(&c.Blocking)
	ck.adminAuth(c.Admin)
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		ck.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	return ck.problems
}

// allow checks server.allow and returns its prefixes, masked.
func (ck *checker) allow(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for i, a := range list {
		path := fmt.Sprintf("server.allow[%d]", i)
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ck.add(path, "%q is not a CIDR prefix (e.g. 192.168.0.0/16, fd00::/8, 192.0.2.7/32)", a)
			continue
		}
		// A client reaching an IPv6 socket with an IPv4-mapped address is
		// an IPv4 client, matched as one: a mapped prefix would match
		// nobody. It is refused rather than rewritten, so that the file
		// says what is matched (::ffff:0:0/96 would be every IPv4 client).
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			v4 := netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
			ck.add(path, "%q is an IPv4-mapped IPv6 prefix, which matches no client: clients with such addresses are matched as IPv4, so write it as %s", a, v4)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// adminHosts checks admin.hosts: each a host name (letters, digits and
// hyphens in dot-separated labels, a trailing dot allowed) or an IP
// literal (IPv6 with or without brackets), without a port: a Host header
// names the listener whatever port it gives.
func (ck *checker) adminHosts(hosts []string) {
	for i, h := range hosts {
		if msg := hostProblem(h); msg != "" {
			ck.add(fmt.Sprintf("admin.hosts[%d]", i), "%q %s", h, msg)
		}
	}
}

// hostProblem says what is wrong with h as an admin.hosts entry, or "".
func hostProblem(h string) string {
	if h == "" {
		return "is empty: want a host name or an IP"
	}
	if ip := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"); strings.Contains(ip, ":") {
		if a, err := netip.ParseAddr(ip); err == nil && a.Zone() == "" {
			return ""
		}
		return "is not a host name or an IP (no port: every port of the listener is accepted)"
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	name := strings.TrimSuffix(h, ".")
	if len(name) == 0 || len(name) > 253 {
		return "is not a host name or an IP"
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "is not a host name or an IP (labels of 1 to 63 letters, digits or hyphens, not beginning or ending with one)"
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "is not a host name or an IP (labels of letters, digits and hyphens)"
			}
		}
	}
	return ""
}

// server checks [server] and returns the listen addresses it accepted.
func (ck *checker) server(s Server) firsts[netip.AddrPort] {
	if len(s.Listen) == 0 {
		ck.add("server.listen", "at least one address is required")
	}
	seen := make(firsts[netip.AddrPort], len(s.Listen))
	for i, l := range s.Listen {
		path := fmt.Sprintf("server.listen[%d]", i)
		ap, ok := ck.bindAddr(path, l)
		if !ok || ap.Port() == 0 { // every port-0 listener gets its own port
			continue
		}
		if j, dup := seen.add(ap, i); dup {
			ck.add(path, "%q is also server.listen[%d]", l, j)
		}
	}
	ck.inRange("server.tcp_idle_timeout_ms", s.TCPIdleTimeoutMS, 1, MaxMilliseconds)
	ck.inRange("server.max_tcp_connections", s.MaxTCPConnections, 1, math.MaxInt)
	ck.inRange("server.max_concurrent_queries", s.MaxConcurrentQueries, 1, math.MaxInt)
	return seen
}

// bindAddr checks a local address to listen on: an IP literal and a port.
// An empty host (":53") is refused so that listening on every interface is
// always spelled out (0.0.0.0 or [::]). Port 0, a kernel-chosen port, is
// accepted: tests and embedders use it.
func (ck *checker) bindAddr(path, s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		ck.add(path, "%q is not IP:PORT (IPv6 in brackets; 0.0.0.0 or [::] for every address)", s)
		return ap, false
	}
	// An IPv6 listener is IPv6 only (IPV6_V6ONLY, so that [::] and
	// 0.0.0.0 bind side by side), and such a socket cannot bind an
	// IPv4-mapped address: the start would fail.
	if ap.Addr().Is4In6() {
		ck.add(path, "%q is an IPv4-mapped IPv6 address, which nxdnsd cannot listen on: write %s", s, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		return ap, false
	}
	return ap, true
}

func (ck *checker) policy(p UpstreamPolicy) {
	ck.inRange("upstream.attempt_timeout_ms", p.AttemptTimeoutMS, 1, MaxMilliseconds)
	ck.inRange("upstream.total_timeout_ms", p.TotalTimeoutMS, 1, MaxMilliseconds)
	if p.AttemptTimeoutMS > 0 && p.TotalTimeoutMS > 0 && p.TotalTimeoutMS < p.AttemptTimeoutMS {
		ck.add("upstream.total_timeout_ms", "%d is less than attempt_timeout_ms (%d)", p.TotalTimeoutMS, p.AttemptTimeoutMS)
	}
	ck.inRange("upstream.read_timeout_ms", p.ReadTimeoutMS, 1, MaxMilliseconds)
	ck.inRange("upstream.failure_threshold", p.FailureThreshold, 1, math.MaxInt)
	ck.inRange("upstream.backoff_ms", p.BackoffMS, 1, MaxMilliseconds)
	ck.inRange("upstream.backoff_max_ms", p.BackoffMaxMS, 1, MaxMilliseconds)
	if p.BackoffMS > 0 && p.BackoffMaxMS > 0 && p.BackoffMaxMS < p.BackoffMS {
		ck.add("upstream.backoff_max_ms", "%d is less than backoff_ms (%d)", p.BackoffMaxMS, p.BackoffMS)
	}
	ck.inRange("upstream.probe_timeout_ms", p.ProbeTimeoutMS, 1, MaxMilliseconds)
}

// upstreams checks [[upstreams]] and sets each one's parsed fields.
func (ck *checker) upstreams(us []Upstream) {
	enabled := 0
	for _, u := range us {
		if u.IsEnabled() {
			enabled++
		}
	}
	switch {
	case len(us) == 0:
		ck.add("upstreams", "at least one enabled upstream is required; the list is empty (leave upstreams out to use the embedded default's)")
	case enabled == 0:
		ck.add("upstreams", "at least one enabled upstream is required; all %d are disabled", len(us))
	case enabled > MaxEnabledUpstreams:
		ck.add("upstreams", "too many enabled upstreams (%d > %d)", enabled, MaxEnabledUpstreams)
	}

	names := make(firsts[string], len(us))
	for i := range us {
		u := &us[i]
		u.Addr, u.DialIP, u.RootCAs = transport.Address{}, netip.Addr{}, nil
		p := fmt.Sprintf("upstreams[%d]", i)
		if u.Name == "" && u.Address != "" {
			ck.add(p+".name", "must not be empty (omit the key to name the upstream by its address)")
		} else if j, dup := names.add(u.Name, i); dup {
			hint := ""
			if u.Name == transport.RedactAddress(u.Address) {
				hint = "; the name defaults to the address, its path hidden, so give one of them a name"
			}
			ck.add(p+".name", "duplicate name %q (also upstreams[%d].name)%s", u.Name, j, hint)
		}

		if u.Address == "" {
			ck.add(p+".address", "is required")
		} else if a, err := transport.ParseAddress(u.Address); err != nil {
			if ae := (*transport.AddressError)(nil); errors.As(err, &ae) {
				ck.add(p+".address", "%q: %s", ae.Address, ae.Reason)
			} else {
				ck.add(p+".address", "%v", err)
			}
		} else {
			u.Addr = a
		}
		// ip and ca_file are judged on their own even when the address
		// is broken: both mistakes are reported at once.
		parsed := u.Addr != transport.Address{}
		if u.IP != "" {
			if parsed && !u.Addr.IsTLS() {
				ck.add(p+".ip", "only tls and https upstreams take ip")
			} else if ip, err := netip.ParseAddr(u.IP); err != nil {
				ck.add(p+".ip", "%q is not an IP address", u.IP)
			} else {
				u.DialIP = ip
			}
		}
		ck.inRange(p+".slots", u.Slots, 1, MaxSlots)
		if u.CAFile != "" {
			if parsed && !u.Addr.IsTLS() {
				ck.add(p+".ca_file", "only tls and https upstreams take ca_file")
			} else if pool, err := loadCAFile(u.CAFile); err != nil {
				ck.add(p+".ca_file", "%v", err)
			} else {
				u.RootCAs = pool
			}
		}
	}
}

func (ck *checker) forwardZones(zs []ForwardZone) {
	seen := make(firsts[string], len(zs))
	for i, z := range zs {
		p := fmt.Sprintf("forward_zones[%d]", i)
		if msg := domainProblem(z.Zone); msg != "" {
			ck.add(p+".zone", "%s", msg)
		} else if j, dup := seen.add(dns.CanonicalName(z.Zone), i); dup {
			ck.add(p+".zone", "duplicate zone %q (also forward_zones[%d].zone)", dns.CanonicalName(z.Zone), j)
		}
		if z.Resolver == "" {
			ck.add(p+".resolver", "is required")
		} else if _, err := parseResolver(z.Resolver); err != nil {
			ck.add(p+".resolver", "%v", err)
		}
	}
}

// localRecords checks [[local_records]], each record and the set of them,
// and sets each valid record's RR. The query path checks none of this
// again: a name's CNAME being its only record is ensured here alone.
func (ck *checker) localRecords(rs []LocalRecord) {
	type key struct{ name, typ, value string }
	seen := make(firsts[key], len(rs))
	atName := make(map[string][]int, len(rs)) // canonical name -> earlier valid records
	for i := range rs {
		r := &rs[i]
		r.RR = nil
		p := fmt.Sprintf("local_records[%d]", i)
		ok := true
		if msg := domainProblem(r.Name); msg != "" {
			ck.add(p+".name", "%s", msg)
			ok = false
		}
		name := dns.CanonicalName(r.Name)
		typ := strings.ToUpper(r.Type)
		var rr dns.RR
		switch typ {
		case "A", "AAAA", "CNAME", "TXT", "PTR":
			var msg string
			rr, msg = newRecord(name, typ, r.Value)
			if msg != "" {
				ck.add(p+".value", "%s", msg)
				ok = false
			}
		case "":
			ck.add(p+".type", "is required")
			ok = false
		default:
			ck.add(p+".type", "%q is not one of A, AAAA, CNAME, TXT, PTR", r.Type)
			ok = false
		}
		ck.inRange(p+".ttl", r.TTL, 0, MaxTTL)
		if !ok {
			continue
		}
		if r.TTL >= 0 && r.TTL <= MaxTTL {
			rr.Header().Ttl = uint32(r.TTL)
			r.RR = rr
		}

		k := key{name, typ, recordText(rr)}
		if j, dup := seen.add(k, i); dup {
			ck.add(p, "duplicate of local_records[%d]", j)
			continue
		}
		// RFC 1034 section 3.6.2: a name with a CNAME has no other data.
		for _, j := range atName[name] {
			if typ == "CNAME" || strings.EqualFold(rs[j].Type, "CNAME") {
				ck.add(p, "a CNAME must be the only record at %s, but local_records[%d] is there too", name, j)
				break
			}
		}
		atName[name] = append(atName[name], i)
	}
}

// newRecord parses a record's value against its type (upper-case) and
// returns the record owned by name (canonical) with a TTL of 0, or a
// message saying what is wrong with the value.
func newRecord(name, typ, v string) (dns.RR, string) {
	hdr := dns.RR_Header{Name: name, Rrtype: dns.StringToType[typ], Class: dns.ClassINET}
	switch typ {
	case "A":
		if ip, err := netip.ParseAddr(v); err == nil && ip.Is4() {
			return &dns.A{Hdr: hdr, A: ip.AsSlice()}, ""
		}
		return nil, fmt.Sprintf("%q is not an IPv4 address", v)
	case "AAAA":
		if ip, err := netip.ParseAddr(v); err == nil && ip.Is6() && ip.Zone() == "" {
			return &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()}, ""
		}
		return nil, fmt.Sprintf("%q is not an IPv6 address", v)
	case "CNAME", "PTR":
		if msg := domainProblem(v); msg != "" {
			return nil, msg
		}
		if typ == "CNAME" {
			return &dns.CNAME{Hdr: hdr, Target: dns.CanonicalName(v)}, ""
		}
		return &dns.PTR{Hdr: hdr, Ptr: dns.CanonicalName(v)}, ""
	default: // TXT
		switch {
		case v == "":
			return nil, "is required"
		case len(v) > maxTXTLen:
			return nil, fmt.Sprintf("is %d bytes; one TXT string holds at most %d", len(v), maxTXTLen)
		}
		// dns.TXT packs its strings in presentation form, where a
		// backslash starts an escape: doubling each one puts the text on
		// the wire byte for byte.
		return &dns.TXT{Hdr: hdr, Txt: []string{strings.ReplaceAll(v, `\`, `\\`)}}, ""
	}
}

// recordText is the value of a record newRecord made, in canonical form:
// an IP as netip writes it, a lower-case fully qualified name, the text as
// it was written.
func recordText(rr dns.RR) string {
	switch rr := rr.(type) {
	case *dns.A:
		ip, _ := netip.AddrFromSlice(rr.A)
		return ip.String()
	case *dns.AAAA:
		ip, _ := netip.AddrFromSlice(rr.AAAA)
		return ip.String()
	case *dns.CNAME:
		return rr.Target
	case *dns.PTR:
		return rr.Ptr
	case *dns.TXT:
		return strings.ReplaceAll(rr.Txt[0], `\\`, `\`)
	}
	return ""
}

// cache checks [cache]. Its bounds hold whether or not it is enabled, so
// that turning it on never reveals an old typo.
func (ck *checker) cache(c Cache) {
	if c.Enabled {
		ck.inRange("cache.size_mib", c.SizeMiB, 1, MaxCacheMiB)
	} else {
		ck.inRange("cache.size_mib", c.SizeMiB, 0, MaxCacheMiB)
	}
	ck.inRange("cache.min_ttl_s", c.MinTTLS, 0, MaxTTL)
	ck.inRange("cache.max_ttl_s", c.MaxTTLS, 0, MaxTTL)
	if c.MinTTLS > c.MaxTTLS && c.MaxTTLS >= 0 {
		ck.add("cache.min_ttl_s", "%d is more than max_ttl_s (%d)", c.MinTTLS, c.MaxTTLS)
	}
	ck.inRange("cache.negative_max_ttl_s", c.NegativeMaxTTLS, 0, MaxTTL)
	ck.inRange("cache.failure_ttl_s", c.FailureTTLS, 0, MaxTTL)
	ck.inRange("cache.stale_max_age_s", c.StaleMaxAgeS, 0, MaxTTL)
	ck.inRange("cache.stale_answer_ttl_s", c.StaleAnswerTTLS, 0, MaxTTL)
	ck.inRange("cache.stale_client_timeout_ms", c.StaleClientTimeoutMS, 1, MaxMilliseconds)
	ck.cachePath(c.Path)
}

// inRange reports v outside lo..hi at path.
func (ck *checker) inRange(path string, v, lo, hi int) {
	switch {
	case v < lo && lo == 1:
		ck.add(path, "must be > 0, got %d", v)
	case v < lo:
		ck.add(path, "must be at least %d, got %d", lo, v)
	case v > hi:
		ck.add(path, "must be at most %d, got %d", hi, v)
	}
}
