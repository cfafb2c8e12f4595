package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listen opens a unixgram socket at name, as systemd's notify socket.
func listen(tb testing.TB, name string) *net.UnixConn {
	tb.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// receive reads one datagram.
func receive(tb testing.TB, c *net.UnixConn) string {
	tb.Helper()
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifiesAPathAndAnAbstractSocket(t *testing.T) {
	for name, socket := range map[string]string{
		"path":     filepath.Join(t.TempDir(), "notify"),
		"abstract": fmt.Sprintf("@nxdnsd-sdnotify-test-%d", os.Getpid()),
	} {
		t.Run(name, func(t *testing.T) {
			c := listen(t, socket)
			n, err := New(socket)
			if err != nil || !n.Enabled() {
				t.Fatalf("New(%q): enabled=%v err=%v", socket, n.Enabled(), err)
			}
			if err := n.Notify(Ready, Status("serving\non two lines")); err != nil {
				t.Fatal(err)
			}
			if got, want := receive(t, c), "READY=1\nSTATUS=serving on two lines"; got != want {
				t.Errorf("received %q, want %q", got, want)
			}
			if err := n.Notify(Stopping); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, c); got != "STOPPING=1" {
				t.Errorf("received %q, want STOPPING=1", got)
			}
		})
	}
}

func TestNoSocketSendsNothing(t *testing.T) {
	for _, n := range []*Notifier{nil, {}, must(New(""))} {
		if n.Enabled() {
			t.Error("enabled without a socket")
		}
		if err := n.Notify(Ready); err != nil {
			t.Errorf("Notify without a socket: %v", err)
		}
	}
}

func must(n *Notifier, err error) *Notifier {
	if err != nil {
		panic(err)
	}
	return n
}

func TestRefusesWhatItCannotWriteTo(t *testing.T) {
	if _, err := New("vsock:2:1234"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("vsock: err=%v, want ErrUnsupported", err)
	}
	n, err := New(filepath.Join(t.TempDir(), "nobody-listens"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(Ready); err == nil {
		t.Error("Notify to a socket nobody listens on: no error")
	}
}

// MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds, read between the
// readings taken before and after.
func TestReloadingCarriesTheMonotonicClock(t *testing.T) {
	before := Monotonic()
	msg := Reloading(Monotonic())
	after := Monotonic()
	head, usec, ok := strings.Cut(msg, "\nMONOTONIC_USEC=")
	if !ok || head != "RELOADING=1" {
		t.Fatalf("%q", msg)
	}
	v, err := strconv.ParseInt(usec, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if before <= 0 || v < before.Microseconds() || v > after.Microseconds() {
		t.Errorf("MONOTONIC_USEC=%d, not within the readings %d..%d µs", v, before.Microseconds(), after.Microseconds())
	}
}
