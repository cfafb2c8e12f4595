package rebind

import (
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkStripPublic is the cost rebinding protection adds to every
// pool answer: one walk of the bytes.
func BenchmarkStripPublic(b *testing.B) {
	_, raw := answer(b, "www.example.com.", dns.TypeA,
		"www.example.com. 300 IN CNAME www.example.com.cdn.example.net.",
		"www.example.com.cdn.example.net. 20 IN A 23.45.67.89",
		"www.example.com.cdn.example.net. 20 IN A 23.45.67.90")
	f := New(true, []string{"plex.direct."})
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := f.Strip(raw); m != nil {
			b.Fatal("stripped")
		}
	}
}

// BenchmarkStripPrivate is the rare answer that loses a record: parsed.
func BenchmarkStripPrivate(b *testing.B) {
	_, raw := answer(b, "evil.example.", dns.TypeA, "evil.example. 60 IN A 192.168.1.1")
	f := New(true, nil)
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := f.Strip(raw); m == nil {
			b.Fatal("not stripped")
		}
	}
}

func BenchmarkPrivateReverseZone(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := PrivateReverseZone("20.1.168.192.in-addr.arpa."); !ok {
			b.Fatal("no zone")
		}
	}
}

// BenchmarkPrivateReverseZoneOther is the common case at step 6 of the
// resolution order: a name that is no reverse name at all.
func BenchmarkPrivateReverseZoneOther(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := PrivateReverseZone("www.example.com."); ok {
			b.Fatal("a zone")
		}
	}
}
