package admin

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/metrics"
)

// 200 half-sent requests (a header never finished) held open against the
// admin listener: an ordinary GET /livez is still answered, and the
// connections the server keeps open never exceed MaxConns; the others
// were closed as newer ones came. Before the cap, all 200 stayed open
// until ReadHeaderTimeout (5 s), and 3,000 held 3,014 descriptors.
func TestAdminConnectionCap(t *testing.T) {
	s := New(Config{Listen: "127.0.0.1:0", Metrics: metrics.New(metrics.Config{}), Pool: &fakePool{}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	addr := s.Addr().String()

	const halfSent = 200
	for range halfSent {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: nxdnsd\r\n"); err != nil {
			t.Fatal(err)
		}
	}

	// Accepted after the 200 (one accept loop, a FIFO queue): once it is
	// answered, the server has seen every one of them.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: nxdnsd\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET /livez behind %d half-sent requests: %v", halfSent, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("GET /livez: %d %q, want 200 \"ok\\n\"", resp.StatusCode, body)
	}

	l := s.ln.(*capListener)
	l.mu.Lock()
	open, peak := len(l.conns), l.peak
	l.mu.Unlock()
	if peak > MaxConns || open > MaxConns {
		t.Errorf("%d connections open at most (%d now), want at most %d", peak, open, MaxConns)
	}
	if peak < MaxConns {
		t.Errorf("%d connections open at most, want %d: the half-sent requests fill the cap", peak, MaxConns)
	}
}

// Past the cap, a new connection displaces the oldest one that is not
// being answered; when every one is being answered, it is turned away.
func TestCapListenerAdmit(t *testing.T) {
	l := &capListener{max: 3}
	conn := func() *capConn {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		return &capConn{Conn: a, l: l}
	}
	c1, c2, c3 := conn(), conn(), conn()
	for _, c := range []*capConn{c1, c2, c3} {
		if victim, ok := l.admit(c); victim != nil || !ok {
			t.Fatalf("admit under the cap: displaced %v, admitted %v", victim, ok)
		}
	}
	c1.answered = true // c2 is now the oldest not being answered
	if victim, ok := l.admit(conn()); victim != c2 || !ok {
		t.Errorf("admit at the cap: displaced %p, admitted %v; want c2 (%p) displaced", victim, ok, c2)
	}
	for _, c := range l.conns {
		c.answered = true
	}
	if victim, ok := l.admit(conn()); victim != nil || ok {
		t.Errorf("admit with every connection answered: displaced %v, admitted %v; want the new one turned away", victim, ok)
	}
	if len(l.conns) != 3 || l.peak != 3 {
		t.Errorf("%d open, %d at most; want 3 and 3", len(l.conns), l.peak)
	}
}

// A connection that never sent a request (a browser's preconnection)
// does not hold up a shutdown: net/http alone would wait five seconds
// for it, longer than the budget here. A request being answered still
// finishes.
func TestShutdownClosesPreconnections(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	entered := make(chan struct{})
	s := New(Config{Listen: "127.0.0.1:0", Metrics: metrics.New(metrics.Config{}), Pool: &fakePool{},
		Routes: func(mux *http.ServeMux) {
			mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
				close(entered)
				<-release
				_, _ = io.WriteString(w, "done\n")
			})
		}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	pre, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(ctx) }()
	// The preconnection is closed at once, while the request goes on.
	_ = pre.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := pre.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the preconnection read %d bytes, %v; want EOF: closed by the shutdown", n, err)
	}
	unblock()
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("the request in progress: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "done\n" {
		t.Errorf("the request in progress got %q, want \"done\\n\"", body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v, want nil: nothing was cut short", err)
	}
}
