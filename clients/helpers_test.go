package clients

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration)        { c.ns.Add(int64(d)) }
func (c *clock) Unix(d time.Duration) int64 { return c.Now().Add(d).Unix() }

// changes is an OnChange that never blocks, and a way to wait for the
// names to reach a state.
type changes chan struct{}

func newChanges() changes { return make(changes, 1) }

func (c changes) OnChange() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitFor waits on the change notifications until cond holds. The bound
// only ends a broken test; nothing is timed.
func (c changes) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	for !cond() {
		select {
		case <-c:
		case <-bound.C:
			tb.Fatalf("never: %s", what)
		}
	}
}

// writeFile replaces path's content as lease writers do: a new file
// renamed over the old one.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

func tempFile(tb testing.TB, name, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	writeFile(tb, p, content)
	return p
}

// fakePTR is a LookupFunc answering from names, counting its calls, and,
// while hold is set, holding every lookup until release or its context
// ends.
type fakePTR struct {
	names map[netip.Addr]string
	hold  chan struct{} // nil: answer at once

	mu       sync.Mutex
	calls    map[netip.Addr]int
	inflight int
	maxIn    int
	started  chan netip.Addr // told of each lookup as it starts, when not nil
}

func (f *fakePTR) lookup(ctx context.Context, a netip.Addr) (string, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[netip.Addr]int{}
	}
	f.calls[a]++
	f.inflight++
	f.maxIn = max(f.maxIn, f.inflight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if f.started != nil {
		f.started <- a
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if n, ok := f.names[a]; ok {
		return n, nil
	}
	return "", ErrNoPTR
}

func (f *fakePTR) callsOf(a netip.Addr) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[a]
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
