package query

import (
	"fmt"

	"github.com/miekg/dns"
)

// canonicalName checks that name is a domain name and returns it in the
// form the tables use: lower case, fully qualified.
func canonicalName(name string) (string, error) {
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return "", fmt.Errorf("%q is not a domain name", name)
	}
	return dns.CanonicalName(name), nil
}

// lastLabel returns the top-level label of a fully qualified name, with its
// trailing dot ("localhost." for "a.b.localhost."). It walks labels the way
// the wire format has them, so an escaped dot ("a\.localhost.") does not
// end a label.
func lastLabel(name string) string {
	off := 0
	for {
		next, end := dns.NextLabel(name, off)
		if end {
			return name[off:]
		}
		off = next
	}
}

// inClass reports whether a question of class c is asked of the records
// nxdnsd holds itself, which all live in class IN. The names stay nxdnsd's in
// other classes too; they just hold no data there.
func inClass(c uint16) bool {
	return c == dns.ClassINET || c == dns.ClassANY
}
