package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// memoryBounded runs bin with args in a process whose data segment is
// bounded (ulimit -d, 200 MB): a read that never ends fails there with
// "fatal error: out of memory" instead of taking the machine's memory.
func memoryBounded(ctx context.Context, bin string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -d 204800 && exec "$0" "$@"`, bin}, args...)...)
}

// notRegular makes, in dir, the -c targets of issue 25 item 6: a symlink
// to /dev/zero, a FIFO, a file past config.MaxFileBytes (sparse); and
// what each must be refused as.
func notRegular(tb testing.TB, dir string) []struct{ name, path, says string } {
	tb.Helper()
	zero := filepath.Join(dir, "zero.toml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		tb.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		tb.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Truncate(big, config.MaxFileBytes+1); err != nil {
		tb.Fatal(err)
	}
	return []struct{ name, path, says string }{
		{"a symlink to /dev/zero", zero, "leads through symlinks to /dev/zero, a character device"},
		{"a FIFO", fifo, "a FIFO"},
		{"a file past the bound", big, "file too large"},
	}
}

// -check and start-up refuse a -c file that is not a regular file, at
// once, saying what it is: exit 2. Before the fix, /dev/zero was read
// until out of memory (here: the 200 MB bound, "fatal error"), the FIFO
// blocked the open for ever (here: killed at the test's bound) and the
// big file was read and parsed.
func TestCheckRefusesWhatIsNotARegularFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, c := range notRegular(t, t.TempDir()) {
		for _, args := range [][]string{{"-c", c.path, "-check"}, {"-c", c.path}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a bound for a blocked read
			cmd := memoryBounded(ctx, bin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			cancel()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitConfig || !strings.Contains(stderr.String(), c.says) ||
				strings.Contains(stderr.String(), "fatal error") {
				t.Errorf("%s: nxdnsd %v: %v, stderr %q; want exit 2 saying %q", c.name, args, err, stderr.String(), c.says)
			}
		}
	}
}

// logLines reads a process's JSON log lines off r onto a channel, until
// r ends (the channel is closed then).
func logLines(r io.Reader) <-chan map[string]any {
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		s := bufio.NewScanner(r)
		for s.Scan() {
			var l map[string]any
			if json.Unmarshal(s.Bytes(), &l) == nil {
				out <- l
			}
		}
	}()
	return out
}

// waitLog returns the next log line whose msg is msg; it fails the test
// if the process ends first, or at a bound that only a stuck process
// reaches.
func waitLog(tb testing.TB, lines <-chan map[string]any, msg string) map[string]any {
	tb.Helper()
	bound := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				tb.Fatalf("the process ended before logging %q", msg)
			}
			if l["msg"] == msg {
				return l
			}
		case <-bound:
			tb.Fatalf("no %q logged", msg)
		}
	}
}

// A SIGHUP while the -c file is a symlink to /dev/zero, a FIFO or a file
// past the bound changes nothing (spec section 9): the running daemon
// logs the problem, counts the failed reload, answers on the running
// configuration, and SIGTERM then stops it with exit 0. Before the fix,
// the /dev/zero reload read until out of memory (the process died,
// "fatal error"), and the FIFO's blocked the loop that SIGTERM needs.
func TestSIGHUPWithWhatIsNotARegularFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	up := wiretest.NewServer(t, wiretest.Answer())
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "nxdns.toml")
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte(fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[cache]
enabled = false
[[upstreams]]
address = "udp://%s"
[[local_records]]
name = "nas.home."
type = "A"
value = "192.168.1.10"
`, up.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(good, cfgPath); err != nil { // as a ConfigMap mounts it
		t.Fatal(err)
	}

	cmd := memoryBounded(context.Background(), bin, "-c", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := logLines(stderr)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines { // the reader ends with the process
		}
		_ = cmd.Wait()
	})
	started := waitLog(t, lines, "nxdnsd started")
	udp := started["udp"].([]any)[0].(string)
	admin := started["admin"].(string)

	targets := notRegular(t, t.TempDir())
	for _, c := range targets {
		tmp := cfgPath + ".new"
		if err := os.Symlink(c.path, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		l := waitLog(t, lines, "reload failed; the running configuration stays")
		if msg, _ := l["error"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: logged %q, want it to say %q", c.name, msg, c.says)
		}
		r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(wiretest.Query("nas.home.", dns.TypeA), udp)
		if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.168.1.10" {
			t.Errorf("%s: after the failed reload nas.home. answered %v, %v", c.name, r, err)
		}
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`nxdns_config_reloads_total{result="failure"} %d`, len(targets)); !strings.Contains(string(body), want+"\n") {
		t.Errorf("metrics do not say %q", want)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, lines, "nxdnsd stopped")
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
}
