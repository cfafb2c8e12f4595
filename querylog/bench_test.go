package querylog

import (
	"io"
	"testing"
)

// BenchmarkQueryLogLine is the cost a query pays for its log line: the
// encoding, into a reused buffer.
func BenchmarkQueryLogLine(b *testing.B) {
	for _, bc := range []struct {
		name string
		enc  Encoder
	}{
		{"plain", Encoder{}},
		{"attempts", Encoder{Attempts: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := poolEntry()
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				buf = bc.enc.Append(buf[:0], e)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkLog is Log end to end at the rate the writer sustains: a
// buffer taken, the line encoded and queued, the writer goroutine batching
// it into io.Discard. A loop this tight outruns any writer, so when the
// buffers run out it waits for the writer (Sync) instead of measuring the
// cheaper drop.
func BenchmarkLog(b *testing.B) {
	l := New(io.Discard, Options{Encoder: Encoder{Attempts: true}})
	defer l.Close()
	e := poolEntry()
	b.ReportAllocs()
	for b.Loop() {
		if !l.Log(e) {
			l.Sync()
			l.Log(e)
		}
	}
}
