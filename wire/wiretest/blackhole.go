package wiretest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Blackhole is a TCP listener on 127.0.0.1 that accepts connections and
// never reads or writes on them: a TLS handshake with it stalls until the
// client gives up. NewBlackhole starts it; the test's cleanup closes it and
// every connection it accepted.
type Blackhole struct {
	// Addr is the listener's "127.0.0.1:PORT".
	Addr string

	ln      net.Listener
	accepts atomic.Int64
	wg      sync.WaitGroup

	mu    sync.Mutex // guards following
	conns []net.Conn
}

// NewBlackhole starts a blackhole and registers its Close with tb.Cleanup.
func NewBlackhole(tb testing.TB) *Blackhole {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("wiretest: starting a blackhole: %v", err)
	}
	b := &Blackhole{Addr: ln.Addr().String(), ln: ln}
	tb.Cleanup(b.Close)
	b.wg.Add(1)
	go b.accept()
	return b
}

// Accepts returns the number of connections accepted.
func (b *Blackhole) Accepts() int64 { return b.accepts.Load() }

// Close closes the listener and every accepted connection, and waits for
// the accept loop. It is idempotent.
func (b *Blackhole) Close() {
	_ = b.ln.Close()
	b.wg.Wait()
	b.mu.Lock()
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (b *Blackhole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // Close ran
		}
		b.accepts.Add(1)
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
	}
}
