package clients

import "net/netip"

// addrMap is a map keyed by canonical addresses (canonicalAddr) that
// looks IPv4 addresses up by their 32 bits: the runtime's fast map lookup
// takes a uint32 key, and costs Name a third of a netip.Addr key's
// lookup. Its zero value is empty, ready to read; make it with
// newAddrMap to write.
type addrMap[V any] struct {
	v4 map[uint32]V
	v6 map[netip.Addr]V
}

func newAddrMap[V any](n int) addrMap[V] {
	return addrMap[V]{v4: make(map[uint32]V, n), v6: make(map[netip.Addr]V)}
}

// v4key is an IPv4 address's key.
func v4key(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (m addrMap[V]) get(a netip.Addr) (V, bool) {
	if a.Is4() {
		v, ok := m.v4[v4key(a)]
		return v, ok
	}
	v, ok := m.v6[a]
	return v, ok
}

func (m addrMap[V]) set(a netip.Addr, v V) {
	if a.Is4() {
		m.v4[v4key(a)] = v
	} else {
		m.v6[a] = v
	}
}

func (m addrMap[V]) delete(a netip.Addr) {
	if a.Is4() {
		delete(m.v4, v4key(a))
	} else {
		delete(m.v6, a)
	}
}

func (m addrMap[V]) len() int { return len(m.v4) + len(m.v6) }

// all calls f with every address and value until f returns false.
func (m addrMap[V]) all(f func(netip.Addr, V) bool) {
	for k, v := range m.v4 {
		if !f(netip.AddrFrom4([4]byte{byte(k >> 24), byte(k >> 16), byte(k >> 8), byte(k)}), v) {
			return
		}
	}
	for a, v := range m.v6 {
		if !f(a, v) {
			return
		}
	}
}

// clone is a copy of m with room for extra more.
func (m addrMap[V]) clone(extra int) addrMap[V] {
	c := newAddrMap[V](len(m.v4) + extra)
	for k, v := range m.v4 {
		c.v4[k] = v
	}
	for a, v := range m.v6 {
		c.v6[a] = v
	}
	return c
}
