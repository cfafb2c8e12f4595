package querylog

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/query"
)

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 123456789, time.FixedZone("CET", 3600))

func poolEntry() *query.Entry {
	return &query.Entry{
		Time:     t0,
		Client:   netip.MustParseAddrPort("192.168.1.20:53211"),
		Proto:    "udp",
		QName:    "example.com.",
		QType:    dns.TypeA,
		Rcode:    dns.RcodeSuccess,
		Source:   query.SourcePool,
		Upstream: "quad9",
		Duration: 12400 * time.Microsecond,
		Queued:   1500 * time.Microsecond,
		Attempts: []actors.Attempt{
			{Upstream: "isp", Outcome: actors.OutcomeExpired, Duration: 2500200 * time.Microsecond, Err: errors.New("i/o timeout")},
			{Upstream: "quad9", Outcome: actors.OutcomeAnswer, Duration: 8100 * time.Microsecond},
		},
	}
}

func TestSpecLine(t *testing.T) {
	enc := Encoder{}
	got := string(enc.Append(nil, poolEntry()))
	want := `{"ts":"2026-11-29T18:00:00.123456Z","client":"192.168.1.20:53211","proto":"udp",` +
		`"qname":"example.com.","qtype":"A","rcode":"NOERROR","source":"pool",` +
		`"upstream":"quad9","duration_ms":12.4}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A client that named itself (a DoH path, /dns-query/NAME) has its name
// beside its address, as client_name (spec sections 6, 12 and 14); a line
// without one is the spec's line as it was.
func TestClientName(t *testing.T) {
	enc := Encoder{}
	e := poolEntry()
	e.Proto, e.ClientName = "https", "pixel-7"
	got := string(enc.Append(nil, e))
	want := `"client":"192.168.1.20:53211","client_name":"pixel-7","proto":"https",`
	if !strings.Contains(got, want) {
		t.Errorf("got  %s\nwant it to hold %s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["client_name"] != "pixel-7" {
		t.Errorf("decoded %v (%v)", m, err)
	}
}

// An answer rebinding protection stripped says so, its source unchanged
// (spec section 15); any other line has no rebind field at all.
func TestRebind(t *testing.T) {
	enc := Encoder{}
	e := poolEntry()
	if got := string(enc.Append(nil, e)); strings.Contains(got, "rebind") {
		t.Errorf("an untouched answer's line mentions rebind: %s", got)
	}
	e.Rebind = true
	got := string(enc.Append(nil, e))
	if want := `"source":"pool","rebind":true,"upstream":"quad9"`; !strings.Contains(got, want) {
		t.Errorf("got  %s\nwant it to hold %s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil || m["rebind"] != true {
		t.Errorf("decoded %v (%v)", m, err)
	}
}

// The class is logged only when it is not IN (issue 16): a CHAOS query
// such as version.bind is told apart from the IN name, and every other
// line stays as it was.
func TestQClassOnlyWhenNotIN(t *testing.T) {
	enc := Encoder{}
	for _, tc := range []struct {
		class uint16
		want  string
	}{
		{0, `"qtype":"A","rcode"`},
		{dns.ClassINET, `"qtype":"A","rcode"`},
		{dns.ClassCHAOS, `"qtype":"A","qclass":"CH","rcode"`},
		{dns.ClassANY, `"qtype":"A","qclass":"ANY","rcode"`},
		{42, `"qtype":"A","qclass":"CLASS42","rcode"`},
	} {
		e := poolEntry()
		e.QClass = tc.class
		got := string(enc.Append(nil, e))
		if !strings.Contains(got, tc.want) {
			t.Errorf("class %d: got %s\nwant it to hold %s", tc.class, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("class %d: not JSON: %s", tc.class, got)
		}
	}
}

func TestAttemptTrail(t *testing.T) {
	enc := Encoder{Attempts: true}
	e := poolEntry()
	e.Attempts = append(e.Attempts, actors.Attempt{Upstream: "", Outcome: actors.OutcomePeerFault, Duration: time.Millisecond, Err: syscall.ECONNREFUSED})
	got := string(enc.Append(nil, e))
	want := `"duration_ms":12.4,"queued_ms":1.5,"attempts":[` +
		`{"upstream":"isp","outcome":"expired","ms":2500.2},` +
		`{"upstream":"quad9","outcome":"answer","ms":8.1},` +
		`{"upstream":null,"outcome":"peer_fault","ms":1,"error":"connection refused"}]}` + "\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("got  %s\nwant ...%s", got, want)
	}

	// Lines of other sources carry no trail, even with attempts on.
	e = &query.Entry{Time: t0, Proto: "tcp", QName: "localhost.", QType: dns.TypeA, Source: query.SourceSpecial}
	if got := string(enc.Append(nil, e)); strings.Contains(got, "attempts") || strings.Contains(got, "queued_ms") {
		t.Errorf("a special-name line with a trail: %s", got)
	}

	// A pool line with no attempt (a queue-only exhaustion) has an empty trail.
	e = &query.Entry{Time: t0, Proto: "udp", QName: "a.", QType: dns.TypeA, Rcode: dns.RcodeServerFailure, Source: query.SourcePool, Queued: 150 * time.Millisecond}
	if got := string(enc.Append(nil, e)); !strings.HasSuffix(got, `"upstream":null,"duration_ms":0,"queued_ms":150,"attempts":[]}`+"\n") {
		t.Errorf("queue-only exhaustion: %s", got)
	}
}

// Every field decodes as the spec's types say, with null where nothing
// applies.
func TestFieldsDecode(t *testing.T) {
	enc := Encoder{Attempts: true}
	for _, tc := range []struct {
		name  string
		entry *query.Entry
		check func(t *testing.T, m map[string]any)
	}{
		{"pool", poolEntry(), func(t *testing.T, m map[string]any) {
			if m["upstream"] != "quad9" || m["duration_ms"] != 12.4 || m["qtype"] != "A" {
				t.Errorf("%v", m)
			}
			if tr, ok := m["attempts"].([]any); !ok || len(tr) != 2 {
				t.Errorf("attempts %v", m["attempts"])
			}
		}},
		{"refused before resolution", &query.Entry{Time: t0, Client: netip.MustParseAddrPort("[2001:db8::1]:5300"), Proto: "tcp", Rcode: dns.RcodeFormatError}, func(t *testing.T, m map[string]any) {
			for _, k := range []string{"qname", "qtype", "source", "upstream"} {
				if v, ok := m[k]; !ok || v != nil {
					t.Errorf("%s = %v, want null", k, v)
				}
			}
			if m["client"] != "[2001:db8::1]:5300" || m["rcode"] != "FORMERR" {
				t.Errorf("%v", m)
			}
		}},
		{"forward zone", &query.Entry{Time: t0, Proto: "udp", QName: "nas.lan.", QType: dns.TypeAAAA, Rcode: dns.RcodeServerFailure, Source: query.SourceForwardZone, Upstream: "192.168.1.1:53", Zone: "lan.", ZoneOutcome: query.ZoneTimeout}, func(t *testing.T, m map[string]any) {
			if m["upstream"] != "192.168.1.1:53" || m["source"] != "forward_zone" || m["rcode"] != "SERVFAIL" || m["client"] != nil {
				t.Errorf("%v", m)
			}
		}},
		{"unknown codes", &query.Entry{Time: t0, Proto: "udp", QName: "x.", QType: 65280, Rcode: dns.RcodeBadVers, Source: query.SourceLocal}, func(t *testing.T, m map[string]any) {
			if m["qtype"] != "TYPE65280" || m["rcode"] != "BADVERS" {
				t.Errorf("%v", m)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := enc.Append(nil, tc.entry)
			if b[len(b)-1] != '\n' || strings.Count(string(b), "\n") != 1 {
				t.Fatalf("not one line: %q", b)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("invalid JSON %s: %v", b, err)
			}
			ts, err := time.Parse(time.RFC3339Nano, m["ts"].(string))
			if err != nil || !ts.Equal(t0.Truncate(time.Microsecond)) || !strings.HasSuffix(m["ts"].(string), "Z") {
				t.Errorf("ts %v: %v", m["ts"], err)
			}
			tc.check(t, m)
		})
	}
}

// Names come off the wire: whatever bytes they hold, the line is valid
// JSON and reads back as encoding/json would have written it.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"example.com.", `a"b\c.`, "tab\there.", "\x00\x1f\x7f.", "caf\xc3\xa9.", "bad\xff\xfeutf8.", "\u2028", "\\046.example."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, b, err)
		}
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q reads back as %q, encoding/json's as %q", s, got, want)
		}
	})
}

func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                          "0",
		12400 * time.Microsecond:   "12.4",
		2500200 * time.Microsecond: "2500.2",
		1234567 * time.Nanosecond:  "1.235",
		time.Nanosecond:            "0",
		5 * time.Second:            "5000",
	} {
		if got := string(appendMillis(nil, d)); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

func TestEncodingAllocatesNothing(t *testing.T) {
	enc := Encoder{Attempts: true}
	e := poolEntry()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = enc.Append(buf[:0], e) }); n != 0 {
		t.Errorf("%v allocations per line, want 0", n)
	}
}

func TestTimestampMatchesLayout(t *testing.T) {
	for _, ts := range []time.Time{
		t0,
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2024, 2, 29, 7, 8, 9, 1000, time.FixedZone("", -5*3600)),
		time.Date(12026, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := string(appendTimestamp(nil, ts)), ts.UTC().Format(tsLayout); got != want {
			t.Errorf("%v: %s, want %s", ts, got, want)
		}
	}
}

// A blocked line names the list after its source (spec sections 6 and
// 11); no other line has a list field.
func TestBlockedLineNamesTheList(t *testing.T) {
	enc := Encoder{Attempts: true}
	e := poolEntry()
	e.Source, e.List, e.Upstream, e.Attempts = query.SourceBlocked, "stevenblack", "", nil
	got := string(enc.Append(nil, e))
	want := `{"ts":"2026-11-29T18:00:00.123456Z","client":"192.168.1.20:53211","proto":"udp",` +
		`"qname":"example.com.","qtype":"A","rcode":"NOERROR","source":"blocked","list":"stevenblack",` +
		`"upstream":null,"duration_ms":12.4}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Error("not valid JSON")
	}
	if line := string(enc.Append(nil, poolEntry())); strings.Contains(line, `"list"`) {
		t.Errorf("a pool line has a list field: %s", line)
	}
}
