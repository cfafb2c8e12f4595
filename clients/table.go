package clients

import (
	"net/netip"
	"strings"
	"time"
)

// table is the names the files and clients.static give, immutable once
// published: Name reads it through one atomic load, with no lock.
type table struct {
	// name holds each address's Name, the first of names, for Name's
	// one lookup.
	name addrMap[string]
	// names holds every name of an address, in precedence order
	// (clients.static, the hosts files, the leases files, each in the
	// order configured, each file in its own order), without
	// duplicates ASCII case aside; the first is the address's Name.
	names addrMap[[]string]
	// addrs holds the addresses of each name, lower case.
	addrs map[string][]netip.Addr
	// next is the earliest end of a lease in the table, when it must be
	// built again without that lease; zero: none ends.
	next time.Time
}

var emptyTable = &table{}

// build makes the table of static and the files, as of now: a lease that
// ended by now is left out.
func build(static []Static, hosts, leases []*file, now time.Time) *table {
	n := 0
	for _, s := range static {
		n += len(s.Addrs)
	}
	for _, f := range append(append([]*file(nil), hosts...), leases...) {
		n += len(f.parsed.bindings)
	}
	t := &table{names: newAddrMap[[]string](n), addrs: make(map[string][]netip.Addr, n)}
	for _, s := range static {
		for _, a := range s.Addrs {
			t.add(canonicalAddr(a), s.Name)
		}
	}
	for _, f := range hosts {
		for _, b := range f.parsed.bindings {
			t.add(b.addr, b.name)
		}
	}
	for _, f := range leases {
		for _, b := range f.parsed.bindings {
			if !b.expires.IsZero() {
				if !now.Before(b.expires) {
					continue
				}
				if t.next.IsZero() || b.expires.Before(t.next) {
					t.next = b.expires
				}
			}
			t.add(b.addr, b.name)
		}
	}
	t.name = newAddrMap[string](t.names.len())
	t.names.all(func(a netip.Addr, ns []string) bool {
		t.name.set(a, ns[0])
		return true
	})
	return t
}

func (t *table) add(a netip.Addr, name string) {
	if name == "" || !a.IsValid() {
		return
	}
	ns, _ := t.names.get(a)
	for _, n := range ns {
		if strings.EqualFold(n, name) {
			return
		}
	}
	t.names.set(a, append(ns, name))
	key := strings.ToLower(name)
	t.addrs[key] = append(t.addrs[key], a)
}
