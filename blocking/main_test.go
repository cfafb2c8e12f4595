package blocking

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/config"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// Manager's loop and every fetch must end with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blockingConfig parses a [blocking] TOML snippet through the real
// validation, so groups come with their parsed prefixes.
func blockingConfig(tb testing.TB, src string) config.Blocking {
	tb.Helper()
	cfg, err := config.Parse([]byte("[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n" + src))
	if err != nil {
		tb.Fatalf("config:\n%v\n%s", err, src)
	}
	return cfg.Blocking
}

// writeList writes a list file in dir and returns its path.
func writeList(tb testing.TB, dir, name string, lines ...string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// startManager starts a Manager on cfg and stops it when the test ends.
func startManager(tb testing.TB, opts Options) *Manager {
	tb.Helper()
	m := NewManager(opts)
	m.Start(context.Background())
	tb.Cleanup(m.Close)
	return m
}

func wire(tb testing.TB, name string) []byte {
	tb.Helper()
	w, ok := WireName(name)
	if !ok {
		tb.Fatalf("%q is not a name", name)
	}
	return w
}

var (
	client1 = netip.MustParseAddr("127.0.0.1")
	client2 = netip.MustParseAddr("127.0.0.2")
)

// decide is e.Decide on a presentation name.
func decide(tb testing.TB, e *Engine, client netip.Addr, name string) Decision {
	tb.Helper()
	return e.Decide(client, nil, wire(tb, name))
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
