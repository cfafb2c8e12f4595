package rebind

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzStrip: Strip never panics, and the byte scan agrees with the
// parsed view: an answer the scan walks and finds no private address in
// has none that StripMsg would strip, so "byte for byte the same" never
// hides an address.
func FuzzStrip(f *testing.F) {
	for _, raw := range publicAnswers(f) {
		f.Add(raw)
	}
	for _, rr := range []string{"x.example. 60 IN A 192.168.1.1", "x.example. 60 IN AAAA ::ffff:10.0.0.1",
		`x.example. 60 IN HTTPS 1 . ipv4hint="10.0.0.1" ipv6hint="fd00::1"`} {
		_, raw := answer(f, "x.example.", dns.TypeA, rr, sig("x.example.", "A"))
		f.Add(raw)
	}
	filter := New(true, []string{"plex.direct."})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := filter.Strip(raw)
		if err == nil && m != nil {
			if _, perr := m.Pack(); perr != nil {
				t.Fatalf("the stripped answer does not pack: %v", perr)
			}
		}
		found, walked := scan(raw)
		if !walked || found {
			return
		}
		var parsed dns.Msg
		if parsed.Unpack(raw) != nil {
			return
		}
		if hasPrivate(&parsed) {
			t.Fatalf("the scan missed a private address in\n%v", &parsed)
		}
	})
}
