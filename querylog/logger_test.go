package querylog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/query"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// entry returns a distinct entry for query i: its qname says i.
func entry(i int) *query.Entry {
	return &query.Entry{Time: t0, Proto: "udp", QName: "q" + strconv.Itoa(i) + ".example.", QType: dns.TypeA, Source: query.SourceLocal}
}

// qnames decodes JSON lines and returns their qnames in order.
func qnames(tb testing.TB, data []byte) []string {
	tb.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var l struct{ QName string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			tb.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l.QName)
	}
	return out
}

// syncBuffer is a writer safe to read after the Logger's Sync or Close.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func TestLinesInOrderAndFlushedOnClose(t *testing.T) {
	var out syncBuffer
	l := New(&out, Options{})
	for i := range 100 {
		if !l.Log(entry(i)) {
			t.Fatalf("line %d dropped with an idle writer", i)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := qnames(t, out.Bytes())
	if len(got) != 100 {
		t.Fatalf("%d lines after Close, want 100", len(got))
	}
	for i, q := range got {
		if q != entry(i).QName {
			t.Fatalf("line %d is %s: out of order", i, q)
		}
	}
	if l.Log(entry(100)) {
		t.Error("Log after Close accepted a line")
	}
	l.Sync() // returns at once after Close
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSyncWritesEverythingAccepted(t *testing.T) {
	var out syncBuffer
	l := New(&out, Options{})
	defer l.Close()
	for i := range 10 {
		l.Log(entry(i))
	}
	l.Sync()
	if n := len(qnames(t, out.Bytes())); n != 10 {
		t.Errorf("%d lines after Sync, want 10", n)
	}
}

// stalledWriter blocks every Write until release is closed, telling
// entered when the first one starts: a disk that hangs.
type stalledWriter struct {
	syncBuffer
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.syncBuffer.Write(p)
}

// A stalled disk costs lines, never time: Log keeps returning, the
// buffers' worth of lines is kept, and Close writes every line accepted.
func TestStalledWriterDropsAndCloseLosesNothingElse(t *testing.T) {
	const buffer = 4
	w := newStalledWriter()
	l := New(w, Options{Buffer: buffer})
	if !l.Log(entry(0)) {
		t.Fatal("first line dropped")
	}
	<-w.entered // the writer is stuck in Write with line 0, every buffer free again

	accepted, dropped := []int{0}, 0
	for i := 1; i < 20; i++ {
		if l.Log(entry(i)) {
			accepted = append(accepted, i)
		} else {
			dropped++
		}
	}
	if len(accepted) != 1+buffer || dropped != 19-buffer {
		t.Errorf("accepted %v, dropped %d; want the first line and %d more", accepted, dropped, buffer)
	}

	close(w.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := qnames(t, w.Bytes())
	if len(got) != len(accepted) {
		t.Fatalf("%d lines written, %d accepted", len(got), len(accepted))
	}
	for j, i := range accepted {
		if got[j] != entry(i).QName {
			t.Errorf("line %d is %s, want %s", j, got[j], entry(i).QName)
		}
	}
}

func TestConcurrentLogging(t *testing.T) {
	var out syncBuffer
	l := New(&out, Options{Buffer: 64})
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range 200 {
				if l.Log(entry(g*1000 + i)) {
					n++
				}
			}
			mu.Lock()
			accepted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(qnames(t, out.Bytes())); n != accepted {
		t.Errorf("%d lines written, %d accepted", n, accepted)
	}
}

// logrotate renames the file, then SIGUSR1 makes the daemon call Reopen:
// lines before it are in the renamed file, lines after it in a new one.
func TestReopenAfterRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "query.log")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Log(entry(1))
	l.Log(entry(2))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Log(entry(3)) // accepted before Reopen: still the old file's
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Log(entry(4))
	l.Sync()

	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(qnames(t, old), " "); got != "q1.example. q2.example. q3.example." {
		t.Errorf("rotated file: %s", got)
	}
	if got := strings.Join(qnames(t, cur), " "); got != "q4.example." {
		t.Errorf("new file: %s", got)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != FileMode {
		t.Errorf("new file mode %v (%v), want %v", st.Mode().Perm(), err, FileMode)
	}
}

// Reopening a path that can no longer be opened keeps the old file.
func TestReopenFailureKeepsWriting(t *testing.T) {
	sub := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "query.log")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // keeps the data readable after the directory goes
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil {
		t.Error("Reopen into a removed directory succeeded")
	}
	l.Log(entry(5))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := qnames(t, data); len(got) != 1 || got[0] != "q5.example." {
		t.Errorf("after a failed reopen the old file holds %v", got)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("", Options{}); err == nil {
		t.Error("Open with no path succeeded")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing", "query.log"), Options{}); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	l, err := Open(Stdout, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Errorf("Reopen of stdout: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close of stdout: %v", err)
	}
	if _, err := os.Stdout.Stat(); err != nil {
		t.Errorf("stdout was closed: %v", err)
	}
}

// failingWriter fails until ok is set.
type failingWriter struct {
	syncBuffer
	mu sync.Mutex
	ok bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	ok := w.ok
	w.mu.Unlock()
	if !ok {
		return 0, errors.New("no space left on device")
	}
	return w.syncBuffer.Write(p)
}

func TestWriteErrorsLoggedOncePerStreak(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	w := &failingWriter{}
	l := New(w, Options{Logger: zap.New(core)})
	for i := range 3 {
		l.Log(entry(i))
		l.Sync()
	}
	w.mu.Lock()
	w.ok = true
	w.mu.Unlock()
	l.Log(entry(3))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("%d error logs for one streak of failures, want 1", n)
	}
	if n := logs.FilterMessage("writing the query log again").Len(); n != 1 {
		t.Errorf("recovery logged %d times, want 1", n)
	}
	if got := qnames(t, w.Bytes()); len(got) != 1 || got[0] != "q3.example." {
		t.Errorf("after recovery: %v", got)
	}
}
