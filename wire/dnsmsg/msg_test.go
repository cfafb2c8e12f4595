package dnsmsg

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestClientUDPSize(t *testing.T) {
	t.Parallel()
	sizes := []struct {
		edns uint16 // 0: no OPT record
		want int
	}{
		{0, 512},
		{100, 512},
		{512, 512},
		{1232, 1232},
		{4096, 4096},
		{65535, 65535},
	}
	for _, s := range sizes {
		q := wiretest.Query("example.com", dns.TypeA)
		if s.edns != 0 {
			q.SetEdns0(s.edns, false)
		}
		if got := ClientUDPSize(q); got != s.want {
			t.Errorf("ClientUDPSize(EDNS %d) = %d, want %d", s.edns, got, s.want)
		}
	}
}

// rawQuery packs a query for the raw reply tests.
func rawQuery(tb testing.TB, edit func(*dns.Msg)) []byte {
	tb.Helper()
	q := wiretest.Query("example.com", dns.TypeMX)
	q.Id = 0xbeef
	edit(q)
	b, err := q.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestRawReplies(t *testing.T) {
	t.Parallel()
	none := func(*dns.Msg) {}
	valid := rawQuery(t, none)
	withCD := rawQuery(t, func(q *dns.Msg) { q.CheckingDisabled = true; q.SetEdns0(1232, true) })
	twoQuestions := rawQuery(t, func(q *dns.Msg) { q.Question = append(q.Question, q.Question[0]) })
	response := rawQuery(t, func(q *dns.Msg) { q.Response = true })

	badLabel := bytes.Clone(valid)
	badLabel[HeaderLen] = 0x40 // a reserved label type
	pointer := bytes.Clone(valid)
	pointer[HeaderLen] = 0xC0 // a compression pointer in the first name
	cut := valid[:len(valid)-3]
	longName := append(bytes.Clone(valid[:HeaderLen]), bytes.Repeat(append([]byte{63}, bytes.Repeat([]byte{'a'}, 63)...), 5)...)
	longName = append(longName, 0, 0, 1, 0, 1)

	cases := []struct {
		name         string
		raw          []byte
		wantNil      bool
		wantQuestion bool
	}{
		{"valid", valid, false, true},
		{"with CD and EDNS", withCD, false, true},
		{"two questions", twoQuestions, false, false},
		{"bad label", badLabel, false, false},
		{"pointer", pointer, false, false},
		{"question cut short", cut, false, false},
		{"name over 255 octets", longName, false, false},
		{"header only", valid[:HeaderLen], false, false},
		{"response", response, true, false},
		{"short", valid[:HeaderLen-1], true, false},
		{"empty", nil, true, false},
	}
	for _, c := range cases {
		for _, b := range []struct {
			name  string
			build func([]byte) []byte
			rcode int
		}{{"Refused", Refused, dns.RcodeRefused}, {"SERVFAIL", func(raw []byte) []byte { return Reply(raw, dns.RcodeServerFailure) }, dns.RcodeServerFailure}} {
			name := b.name + "/" + c.name
			out := b.build(c.raw)
			if c.wantNil {
				if out != nil {
					t.Errorf("%s: %x, want nil", name, out)
				}
				continue
			}
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Errorf("%s: the reply does not parse: %v", name, err)
				continue
			}
			if r.Id != 0xbeef || !r.Response || r.Rcode != b.rcode {
				t.Errorf("%s: ID %#x QR=%v rcode %d, want 0xbeef, QR, %d", name, r.Id, r.Response, r.Rcode, b.rcode)
			}
			if r.RecursionDesired != (c.raw[2]&0x01 != 0) || r.CheckingDisabled != (Flags(c.raw)&FlagCD != 0) {
				t.Errorf("%s: RD=%v CD=%v do not echo the query's", name, r.RecursionDesired, r.CheckingDisabled)
			}
			if got := len(r.Question) == 1; got != c.wantQuestion {
				t.Errorf("%s: question %v, want one: %v", name, r.Question, c.wantQuestion)
			}
			if c.wantQuestion && (r.Question[0].Name != "example.com." || r.Question[0].Qtype != dns.TypeMX) {
				t.Errorf("%s: question %v, want the query's", name, r.Question[0])
			}
			if len(r.Answer)+len(r.Ns)+len(r.Extra) != 0 {
				t.Errorf("%s: the reply has records", name)
			}
		}
	}
}

// FuzzRawReply: whatever the bytes, the raw builders do not panic and what
// they return parses as a reply with the input's ID.
func FuzzRawReply(f *testing.F) {
	f.Add(rawQuery(f, func(*dns.Msg) {}))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0x0C, 0, 1, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := Reply(raw, dns.RcodeFormatError)
		if out == nil {
			return
		}
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("Reply(%x) = %x does not parse: %v", raw, out, err)
		}
		if r.Id != uint16(raw[0])<<8|uint16(raw[1]) || !r.Response {
			t.Fatalf("Reply(%x) = %x: wrong ID or QR clear", raw, out)
		}
	})
}
