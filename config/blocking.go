package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/nxdnsd/nxdnsd/blocking/rule"
)

// Blocking is the [blocking] table (spec section 11).
type Blocking struct {
	Enabled         bool            `toml:"enabled"`          // false: no list is loaded or applied
	Answer          string          `toml:"answer"`           // null, nxdomain, nodata, refused, ip
	AnswerIP        []string        `toml:"answer_ip"`        // answer = "ip": one IPv4 and/or one IPv6 address
	AnswerTTLS      int             `toml:"answer_ttl_s"`     // TTL of a blocked answer and of its SOA
	CNAMEInspection bool            `toml:"cname_inspection"` // block an answer whose CNAME/DNAME chain names a blocked name
	RefreshH        int             `toml:"refresh_h"`        // how often each list is fetched again
	MaxListMiB      int             `toml:"max_list_mib"`     // a list body larger than this (decompressed) is refused
	StateDir        string          `toml:"state_dir"`        // last good copies and the API's rules; "" memory only
	Block           []string        `toml:"block"`            // custom block rules for every client
	Allow           []string        `toml:"allow"`            // custom allow rules for every client
	Lists           []BlockingList  `toml:"lists"`            // [[blocking.lists]]
	Groups          []BlockingGroup `toml:"groups"`           // [[blocking.groups]]

	// AnswerAddrs is AnswerIP parsed by validation, read from no key: at
	// most one IPv4 and one IPv6 address.
	AnswerAddrs []netip.Addr `toml:"-"`
}

// BlockingList is one [[blocking.lists]] entry.
type BlockingList struct {
	Name    string `toml:"name"`    // unique, not "rule"
	Source  string `toml:"source"`  // http(s) URL or a file path
	Kind    string `toml:"kind"`    // block or allow
	Enabled *bool  `toml:"enabled"` // nil (key absent) means true
}

// IsEnabled reports whether the list is loaded and applied.
func (l BlockingList) IsEnabled() bool { return l.Enabled == nil || *l.Enabled }

// IsURL reports whether the source is fetched over HTTP rather than read
// from a file.
func (l BlockingList) IsURL() bool {
	return strings.HasPrefix(l.Source, "http://") || strings.HasPrefix(l.Source, "https://")
}

// BlockingGroup is one [[blocking.groups]] entry.
type BlockingGroup struct {
	Name    string   `toml:"name"`    // unique; "default" holds the clients in no other group
	Clients []string `toml:"clients"` // addresses, CIDR prefixes, client names
	Lists   []string `toml:"lists"`   // names of [[blocking.lists]]

	// Set by validation, read from no key: Clients split into prefixes
	// (an address is its /32 or /128, masked, IPv4-mapped ones unmapped)
	// and client names (lower-case).
	Prefixes []netip.Prefix `toml:"-"`
	Names    []string       `toml:"-"`
}

// Blocking limits and reserved names.
const (
	// ReservedListName names the custom rules in EDE texts, the query log
	// and metrics, so no list may be called so.
	ReservedListName = "rule"

	// DefaultGroup is the group of the clients in no other group.
	DefaultGroup = "default"

	// MaxBlockingLists bounds [[blocking.lists]]: a client's lists are a
	// fixed-size bit set on the query path. Real set-ups use a handful.
	MaxBlockingLists = 256

	// MaxBlockingGroups bounds [[blocking.groups]] (the default group
	// included), for the same reason.
	MaxBlockingGroups = 64

	// MaxListMiB bounds blocking.max_list_mib: 4 GiB is far past any list.
	MaxListMiB = 4096

	// MaxRefreshH bounds blocking.refresh_h: a year.
	MaxRefreshH = 24 * 366
)

func defaultBlocking() Blocking {
	return Blocking{
		Enabled:         true,
		Answer:          "null",
		AnswerIP:        []string{},
		AnswerTTLS:      10,
		CNAMEInspection: true,
		RefreshH:        24,
		MaxListMiB:      64,
		StateDir:        "",
		Block:           []string{},
		Allow:           []string{},
	}
}

func newBlockingList() BlockingList { return BlockingList{Kind: "block"} }

// blocking checks [blocking] and sets its parsed fields.
func (ck *checker) blocking(b *Blocking) {
	switch b.Answer {
	case "null", "nxdomain", "nodata", "refused", "ip":
	default:
		ck.add("blocking.answer", "%q is not one of null, nxdomain, nodata, refused, ip", b.Answer)
	}
	b.AnswerAddrs = nil
	var v4, v6 bool
	for i, s := range b.AnswerIP {
		path := fmt.Sprintf("blocking.answer_ip[%d]", i)
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			ck.add(path, "%q is not an IP address", s)
			continue
		}
		a = a.Unmap()
		if a.Is4() && v4 || a.Is6() && v6 {
			ck.add(path, "%q: answer_ip holds at most one IPv4 and one IPv6 address", s)
			continue
		}
		v4, v6 = v4 || a.Is4(), v6 || a.Is6()
		b.AnswerAddrs = append(b.AnswerAddrs, a)
	}
	if b.Answer == "ip" && len(b.AnswerIP) == 0 {
		ck.add("blocking.answer_ip", `answer = "ip" needs at least one address`)
	}
	ck.inRange("blocking.answer_ttl_s", b.AnswerTTLS, 0, MaxTTL)
	ck.inRange("blocking.refresh_h", b.RefreshH, 1, MaxRefreshH)
	ck.inRange("blocking.max_list_mib", b.MaxListMiB, 1, MaxListMiB)
	ck.customRules("blocking.block", b.Block, false)
	ck.customRules("blocking.allow", b.Allow, true)

	if len(b.Lists) > MaxBlockingLists {
		ck.add("blocking.lists", "at most %d lists, got %d", MaxBlockingLists, len(b.Lists))
	}
	lists := make(map[string]int, len(b.Lists))
	for i, l := range b.Lists {
		path := fmt.Sprintf("blocking.lists[%d]", i)
		switch {
		case l.Name == "":
			ck.add(path+".name", "a list needs a name")
		case l.Name == ReservedListName:
			ck.add(path+".name", "%q is reserved for the custom rules (blocking.block, blocking.allow, /api/rules)", l.Name)
		default:
			if j, dup := lists[l.Name]; dup {
				ck.add(path+".name", "%q is also blocking.lists[%d].name", l.Name, j)
			} else {
				lists[l.Name] = i
			}
		}
		if msg := sourceProblem(l.Source); msg != "" {
			ck.add(path+".source", "%s", msg)
		}
		if l.Kind != "block" && l.Kind != "allow" {
			ck.add(path+".kind", "%q is not one of block, allow", l.Kind)
		}
	}

	if len(b.Groups) > MaxBlockingGroups {
		ck.add("blocking.groups", "at most %d groups, got %d", MaxBlockingGroups, len(b.Groups))
	}
	groups := make(map[string]int, len(b.Groups))
	for i := range b.Groups {
		g := &b.Groups[i]
		path := fmt.Sprintf("blocking.groups[%d]", i)
		switch {
		case g.Name == "":
			ck.add(path+".name", "a group needs a name")
		default:
			if j, dup := groups[g.Name]; dup {
				ck.add(path+".name", "%q is also blocking.groups[%d].name", g.Name, j)
			} else {
				groups[g.Name] = i
			}
		}
		if g.Name == DefaultGroup && len(g.Clients) > 0 {
			ck.add(path+".clients", "the %q group is the clients in no other group: it names none", DefaultGroup)
		}
		g.Prefixes, g.Names = nil, nil
		for j, c := range g.Clients {
			cpath := fmt.Sprintf("%s.clients[%d]", path, j)
			if p, ok := clientPrefix(c); ok {
				g.Prefixes = append(g.Prefixes, p)
			} else if clientName(c) {
				g.Names = append(g.Names, strings.ToLower(strings.TrimSuffix(c, ".")))
			} else {
				ck.add(cpath, "%q is not an address, a CIDR prefix or a client name", c)
			}
		}
		for j, name := range g.Lists {
			if _, ok := lists[name]; !ok {
				ck.add(fmt.Sprintf("%s.lists[%d]", path, j), "%q names no [[blocking.lists]] entry", name)
			}
		}
	}
}

// customRules checks that each entry of blocking.block or blocking.allow
// is one rule of a list's syntax.
func (ck *checker) customRules(path string, rules []string, allow bool) {
	for i, s := range rules {
		if _, ok := rule.One(s, allow); !ok {
			ck.add(fmt.Sprintf("%s[%d]", path, i), "%q is not one rule (a name, ||name^, @@||name^, *.name or /regexp/)", s)
		}
	}
}

// sourceProblem says why a list's source is neither an http(s) URL nor a
// file path, or returns "".
func sourceProblem(s string) string {
	switch {
	case s == "":
		return "a list needs a source: an http:// or https:// URL, or a file path"
	case strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Hostname() == "" {
			return fmt.Sprintf("%q is not a URL with a host", redactURL(s))
		}
	case strings.Contains(s, "://"):
		return fmt.Sprintf("%q: only http:// and https:// URLs, or file paths, are list sources", redactURL(s))
	}
	return ""
}

// redactURL drops a URL's user info and query, which often hold a token,
// from a message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.IndexAny(s, "@?"); i >= 0 {
			return s[:i] + "…"
		}
		return s
	}
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}

// clientPrefix parses a group's client as an address or a prefix.
func clientPrefix(s string) (netip.Prefix, bool) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// clientName reports whether s can be a client's name (section 15): a
// host name, perhaps with its final dot.
func clientName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > rule.MaxNameLen {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > rule.MaxLabelLen {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
