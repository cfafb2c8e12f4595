package dnsmsg

import (
	"testing"

	"github.com/miekg/dns"
)

// pack packs m or fails tb.
func pack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
