package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// logrotate's way: rename the query log, send SIGUSR1. Lines of queries
// answered before the signal are in the renamed file, later ones in a new
// file at the configured path, and SIGTERM flushes the last of them.
func TestSIGUSR1ReopensTheQueryLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	up := wiretest.NewServer(t, wiretest.Answer())
	logPath := filepath.Join(t.TempDir(), "query.log")
	cfg := writeConfig(t, fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = ""
[query_log]
path = %q
[[upstreams]]
address = "udp://%s"
`, logPath, up.Addr))

	cmd := exec.Command(buildBinary(t), "-c", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// Every log line's message and UDP addresses, in order, until the
	// process closes stderr.
	type logLine struct {
		Msg string   `json:"msg"`
		UDP []string `json:"udp"`
	}
	logs := make(chan logLine, 64)
	go func() {
		defer close(logs)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				logs <- l
			}
		}
	}()
	waitFor := func(msg string) logLine {
		t.Helper()
		timeout := time.After(10 * time.Second) // a bound for a broken binary, not a wait for timing
		for {
			select {
			case l, ok := <-logs:
				if !ok {
					t.Fatalf("nxdnsd exited before logging %q", msg)
				}
				if l.Msg == msg {
					return l
				}
			case <-timeout:
				t.Fatalf("no %q log line", msg)
			}
		}
	}
	udpAddr := waitFor("nxdnsd started").UDP[0]
	query := func(name string) {
		t.Helper()
		c := &dns.Client{Timeout: 5 * time.Second}
		if _, _, err := c.Exchange(wiretest.Query(name, dns.TypeA), udpAddr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	query("before.example.")
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor("query log reopened")
	query("after.example.")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range logs { // drain until the process closes stderr, then reap it
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}

	for path, want := range map[string]string{logPath + ".1": "before.example.", logPath: "after.example."} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ QName string }
		if err := json.Unmarshal(data, &l); err != nil || l.QName != want {
			t.Errorf("%s holds %q, want one line for %s", filepath.Base(path), data, want)
		}
	}
}
