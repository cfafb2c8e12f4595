package history

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

// A row comes out of the queue as it went in: every field, the time to
// the nanosecond; a proto or source this version does not know comes
// out as none, which is how the stores keep it. And a queued row is the
// 112 bytes QueueSize's memory is reckoned by (a Row is 168).
func TestQueuedRowRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 456789012, time.UTC)
	in := Row{
		Time: at, Client: netip.MustParseAddr("fe80::1%eth0"), ClientName: "tv", Proto: "https",
		QName: "Www.Example.", QType: 28, Rcode: 4095, Source: "blocked", Upstream: "primary",
		Duration: 1234567 * time.Nanosecond, List: "ads",
	}
	q := queue(&in)
	out := q.row()
	if !out.Time.Equal(at) {
		t.Errorf("time %v, want %v", out.Time, at)
	}
	out.Time = in.Time
	if out != in {
		t.Errorf("out of the queue:\n%+v\nwant\n%+v", out, in)
	}
	odd := Row{Time: at, Proto: "quic", Source: "oracle", Rcode: -1}
	q = queue(&odd)
	if got := q.row(); got.Proto != "" || got.Source != "" || got.Rcode != -1 {
		t.Errorf("an unknown proto and source came out as %q, %q (rcode %d); want none and none (-1)", got.Proto, got.Source, got.Rcode)
	}
	if n := unsafe.Sizeof(queued{}); n != 112 {
		t.Errorf("a queued row takes %d bytes, want 112", n)
	}
}

// The switches of sourceCode and protoCode say what the tables say.
func TestCodesMatchTables(t *testing.T) {
	for i, v := range sources {
		if got := sourceCode(v); got != i {
			t.Errorf("sourceCode(%q) = %d, want %d", v, got, i)
		}
	}
	for i, v := range protos {
		if got := protoCode(v); got != i {
			t.Errorf("protoCode(%q) = %d, want %d", v, got, i)
		}
	}
	if sourceCode("oracle") != sourceNone || protoCode("quic") != protoNone {
		t.Error("an unknown source or proto has a code of its own")
	}
}
