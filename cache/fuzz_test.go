package cache

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzPut feeds Put arbitrary bytes under the key of their question. Put
// must not panic; whatever it stores must come back from AppendAnswer as
// a message miekg/dns parses when the answer less its OPT record did, with
// the same records but for TTLs, and with TTLs no larger than stored.
func FuzzPut(f *testing.F) {
	for _, m := range []msg{
		example,
		{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(300, 60)}, opt: true},
		{name: "a.example.", qtype: dns.TypeAAAA, ns: []string{soaRR(300, 60)}},
		{name: "a.example.", qtype: dns.TypeA, an: []string{
			"a.example. 7200 IN A 192.0.2.1",
			"a.example. 7200 IN RRSIG A 13 2 7200 20261231000000 20261101000000 12345 example. dGVzdA==",
		}, ns: []string{"example. 3600 IN NSEC b.example. A RRSIG NSEC"}, opt: true, compress: true},
		{name: "mx.example.", qtype: dns.TypeMX, an: []string{"mx.example. 60 IN MX 10 mail.mx.example."}, compress: true},
	} {
		f.Add(m.pack(f))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := new(dns.Msg)
		parsed := in.Unpack(b) == nil
		k := Key{Name: "fuzz.example.", Type: dns.TypeA, Class: dns.ClassINET}
		if parsed && len(in.Question) == 1 {
			q := in.Question[0]
			k = Key{Name: strings.ToLower(q.Name), Type: q.Qtype, Class: q.Qclass}
		}
		cfg := testConfig()
		cfg.MinTTL = 10 * time.Second
		c := New(cfg)
		if !c.Put(k, b, t0) {
			return
		}
		h, st := c.Get(k, t0)
		if st != Fresh {
			t.Fatalf("stored, then %v", st)
		}
		out := h.AppendAnswer(nil, 1, nil, t0.Add(5*time.Second), 0)
		if !parsed || pointsIntoTTL(b) {
			// Put's caller vouches for the bytes, and no encoder points
			// a name at a TTL, which the cache rewrites.
			return
		}
		got := new(dns.Msg)
		if err := got.Unpack(out); err != nil {
			// Only a message that depended on its OPT's bytes (a
			// compression pointer into them) may fail now.
			s, _ := walk(b, 0, maxTTL)
			less := append([]byte(nil), b[:s.optStart]...)
			binary.BigEndian.PutUint16(less[10:], uint16(s.ar-1))
			if s.optStart >= 0 && new(dns.Msg).Unpack(less) != nil {
				return
			}
			t.Fatalf("the stored answer does not parse: %v\nin  %x\nout %x", err, b, out)
		}
		want := append(append(in.Answer, in.Ns...), in.Extra...)
		want = slicesDeleteOPT(want)
		have := append(append(got.Answer, got.Ns...), got.Extra...)
		if len(have) != len(want) || got.Rcode&0xF != in.Rcode&0xF || got.Id != 1 {
			t.Fatalf("%d records (rcode %d), want %d (rcode %d)", len(have), got.Rcode, len(want), in.Rcode)
		}
		for i := range have {
			if have[i].Header().Ttl > max(want[i].Header().Ttl, 10) && have[i].Header().Ttl != 0 &&
				want[i].Header().Ttl <= maxTTL {
				t.Errorf("record %d: TTL %d, came with %d", i, have[i].Header().Ttl, want[i].Header().Ttl)
			}
			w := dns.Copy(want[i])
			w.Header().Ttl = have[i].Header().Ttl
			if have[i].String() != w.String() {
				t.Errorf("record %d: %v, want %v", i, have[i], w)
			}
		}
	})
}

func slicesDeleteOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// pointsIntoTTL reports whether any two bytes of b that could be a
// compression pointer lead to labels that overlap a record's TTL.
func pointsIntoTTL(b []byte) bool {
	s, ok := walk(b, 0, maxTTL)
	if !ok {
		return false
	}
	ttl := make(map[int]bool)
	ttlOffsets(b, s.qend, func(off int) {
		for i := range 4 {
			ttl[off+i] = true
		}
	})
	for i := 0; i+1 < len(b); i++ {
		if b[i]&0xC0 != 0xC0 {
			continue
		}
		off := int(b[i]&0x3F)<<8 | int(b[i+1])
		for hops := 0; off < len(b) && hops < 256; hops++ {
			c := int(b[off])
			if c&0xC0 == 0xC0 {
				if off+1 >= len(b) || ttl[off] || ttl[off+1] {
					return off+1 < len(b)
				}
				off = int(b[off]&0x3F)<<8 | int(b[off+1])
				continue
			}
			for j := off; j <= off+c && j < len(b); j++ {
				if ttl[j] {
					return true
				}
			}
			if c == 0 {
				break
			}
			off += c + 1
		}
	}
	return false
}
