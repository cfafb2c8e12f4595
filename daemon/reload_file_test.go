package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/safefile"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// A SIGHUP whose -c file has become a FIFO, a symlink to a device or a
// file past config.MaxFileBytes changes nothing (spec section 9): the
// read is refused at once, the running configuration stays and answers,
// the problem is logged and each failure counted. Before the fix the FIFO
// blocked the reload (and so SIGTERM) until a writer came, /dev/null read
// as an empty configuration, the big file was read whole; a symlink to
// /dev/zero, which read until out of memory, is cmd/nxdnsd's test, in a
// process of bounded memory.
func TestReloadRefusesWhatIsNotARegularFile(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	src := reloadSrc(upstreamTOML(up.Addr) + "[[local_records]]\nname = \"nas.home.\"\ntype = \"A\"\nvalue = \"192.168.1.10\"\n")
	dir := t.TempDir()
	path := filepath.Join(dir, "nxdns.toml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := zapobserver.New(zap.InfoLevel)
	d := startWithLog(t, cfg, zap.New(core))
	udp, _ := d.Addrs()
	addr := udp[0].String()

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, config.MaxFileBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	null := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, target string
		want         error
	}{
		{"a FIFO", fifo, safefile.ErrNotRegular},
		{"a symlink to /dev/null", null, safefile.ErrNotRegular},
		{"a file past the bound", big, safefile.ErrTooLarge},
	}
	for _, c := range cases {
		// The -c file becomes c.target, as an operator's mistake would
		// make it: renamed over it, or a symlink put in its place.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.Symlink(c.target, path); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Reload(func() (*config.Config, error) { return config.Load(path) }) }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second): // a bound for a blocked read, not a timing assertion
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close() // the blocked read ends
			}
			<-done
			t.Fatalf("%s: the reload blocked", c.name)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Reload = %v, want %v", c.name, err, c.want)
		}
		if got := answerA(t, addr, "nas.home."); got != "192.168.1.10" {
			t.Errorf("%s: after the failed reload nas.home. is %s, want the running 192.168.1.10", c.name, got)
		}
	}
	failed := logs.FilterMessage("reload failed; the running configuration stays").All()
	if len(failed) != len(cases) {
		t.Fatalf("%d failed reloads logged, want %d", len(failed), len(cases))
	}
	for i, e := range failed {
		if msg, _ := e.ContextMap()["error"].(string); !strings.Contains(msg, path) {
			t.Errorf("%s: logged %q, not naming the file", cases[i].name, msg)
		}
	}
	fs := scrapeDaemon(t, d)
	if ok, fail := metricValue(t, fs, "nxdns_config_reloads_total", "result", "success"), metricValue(t, fs, "nxdns_config_reloads_total", "result", "failure"); ok != 0 || fail != float64(len(cases)) {
		t.Errorf("reloads: success %v failure %v, want 0 and %d", ok, fail, len(cases))
	}
}

// SIGTERM while a SIGHUP's read of the -c file hangs (a network mount
// that stopped answering: what safefile cannot refuse) still stops Run,
// at once, with no error. Before the fix the read ran on Run's loop, which
// waited for it: Run returned only once the read did.
func TestRunStopsWhileAReloadReadHangs(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	src := reloadSrc(upstreamTOML(up.Addr))
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{})
	release := make(chan struct{})
	defer close(release) // the read ends before the test does
	load := func() (*config.Config, error) {
		close(reading)
		<-release
		return config.Parse([]byte(src))
	}
	core, logs := zapobserver.New(zap.InfoLevel)
	reloads := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, zap.New(core), RunOptions{Reload: reloads, Load: load}) }()
	reloads <- syscall.SIGHUP
	<-reading
	cancel() // SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a bound for a blocked Run, not a timing assertion
		release <- struct{}{}
		<-done
		t.Fatal("Run waited for the read to end")
	}
	if logs.FilterMessageSnippet("the reload is abandoned").Len() != 1 {
		t.Errorf("logged %v; want the abandoned reload said", logs.All())
	}
}
