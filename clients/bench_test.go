package clients

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkName is what naming a client costs a query: 10,000 named
// clients, each asked in turn.
func BenchmarkName(b *testing.B) {
	const n = 10000
	static := make([]Static, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		addrs[i] = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		static[i] = Static{Name: fmt.Sprintf("client-%d", i), Addrs: []netip.Addr{addrs[i]}}
	}
	d := New(Config{Static: static, PollInterval: time.Hour}, nil, nil)
	defer d.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if d.Name(addrs[i]) == "" {
			b.Fatal("unnamed")
		}
		if i++; i == n {
			i = 0
		}
	}
}

// BenchmarkNameUnknown is a client with no name whose PTR lookup is
// pending: the pending mark is read, nothing sent.
func BenchmarkNameUnknown(b *testing.B) {
	fake := &fakePTR{hold: make(chan struct{})}
	d := New(Config{ReverseLookup: true, PollInterval: time.Hour}, fake.lookup, nil)
	defer d.Close()
	a := netip.MustParseAddr("192.168.1.99")
	b.ReportAllocs()
	for b.Loop() {
		d.Name(a)
	}
}

// BenchmarkNameLoopback is a client on loopback, the host itself, with
// reverse lookups on: never looked up, so never in the PTR table either.
func BenchmarkNameLoopback(b *testing.B) {
	d := New(Config{ReverseLookup: true, PollInterval: time.Hour}, (&fakePTR{}).lookup, nil)
	defer d.Close()
	a := netip.MustParseAddr("127.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		if d.Name(a) != "" {
			b.Fatal("a loopback client named")
		}
	}
}

// BenchmarkMapBaseline is a bare map lookup over the same 10,000
// addresses, the floor BenchmarkName is to be read against on a busy
// machine.
func BenchmarkMapBaseline(b *testing.B) {
	const n = 10000
	m := make(map[netip.Addr][]string, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		addrs[i] = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		m[addrs[i]] = []string{fmt.Sprintf("client-%d", i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if len(m[addrs[i]]) == 0 {
			b.Fatal("unnamed")
		}
		if i++; i == n {
			i = 0
		}
	}
}
