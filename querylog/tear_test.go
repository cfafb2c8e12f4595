package querylog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// cuttingWriter writes the first budget bytes it is given, then fails
// (ENOSPC) until refilled: a disk that fills in the middle of a write.
type cuttingWriter struct {
	mu     sync.Mutex
	budget int
	b      bytes.Buffer
}

func (w *cuttingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(p), w.budget)
	w.b.Write(p[:n])
	w.budget -= n
	if n < len(p) {
		return n, syscall.ENOSPC
	}
	return n, nil
}

func (w *cuttingWriter) refill(n int) {
	w.mu.Lock()
	w.budget = n
	w.mu.Unlock()
}

func (w *cuttingWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.b.Bytes())
}

// lines splits data into lines and reports which parse as JSON objects.
func lines(data []byte) (whole, broken [][]byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var v map[string]any
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			whole = append(whole, bytes.Clone(sc.Bytes()))
		} else {
			broken = append(broken, bytes.Clone(sc.Bytes()))
		}
	}
	return whole, broken
}

// A write cut short by a full disk on a writer that cannot take bytes back
// leaves one cut line, the next starts on a fresh line, and every line not
// written whole is counted as dropped (issue 16: the next line was appended
// to the cut one, `{"ts":…,"proto":"udp",{"ts":…`, and nothing was counted).
// Before the fix the line after the cut was glued to it and Dropped was
// never called.
func TestCutWriteResumesOnAFreshLineAndCountsTheLost(t *testing.T) {
	const before, during, after = 10, 10, 10
	var enc Encoder
	line := len(enc.Append(nil, entry(10))) // every qname of 10..19 has the same length
	w := &cuttingWriter{}
	var dropped atomic.Int64
	l := New(w, Options{Dropped: func(n int) { dropped.Add(int64(n)) }})
	defer l.Close()

	w.refill(1 << 20)
	for i := range before {
		l.Log(entry(100 + i))
	}
	l.Sync()
	// Room for two lines and a half: one batch of ten is cut in its
	// third line.
	w.refill(2*line + line/2)
	for i := range during {
		l.Log(entry(10 + i))
	}
	l.Sync()
	w.refill(1 << 20)
	for i := range after {
		l.Log(entry(200 + i))
	}
	l.Sync()

	whole, broken := lines(w.Bytes())
	if len(broken) != 1 {
		t.Errorf("%d broken lines, want the one cut: %q", len(broken), broken)
	}
	if got, want := len(whole), before+2+after; got != want {
		t.Errorf("%d whole lines, want %d", got, want)
	}
	if got, want := dropped.Load(), int64(during-2); got != want {
		t.Errorf("%d lines counted dropped, want %d (the cut one and those after it)", got, want)
	}
}
