package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/internal/pgtest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// replica is one nxdnsd process of a fleet.
type replica struct {
	udp, admin string
	lines      <-chan map[string]any
	cmd        *exec.Cmd
}

// stop ends the process with SIGTERM, which writes what its history has
// queued before it exits 0.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range r.lines {
	}
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
}

func startReplica(t *testing.T, bin, upstream, postgres, instance string) *replica {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[[upstreams]]
address = "udp://%s"
[history]
postgres = %q
instance = %q
`, upstream, postgres, instance), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := memoryBounded(context.Background(), bin, "-c", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := logLines(stderr)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			for range lines { // the reader ends with the process
			}
			_ = cmd.Wait()
		}
	})
	started := waitLog(t, lines, "nxdnsd started")
	waitLog(t, lines, "query history open")
	return &replica{udp: started["udp"].([]any)[0].(string), admin: started["admin"].(string), lines: lines, cmd: cmd}
}

// ask sends n queries for distinct names and fails the test unless every
// one is answered NOERROR.
func (r *replica) ask(t *testing.T, prefix string, n int) {
	t.Helper()
	c := &dns.Client{Timeout: 5 * time.Second}
	for i := range n {
		name := fmt.Sprintf("%s%d.example.", prefix, i)
		m, _, err := c.Exchange(wiretest.Query(name, dns.TypeA), r.udp)
		if err != nil || m.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s via %s: %v, %v", name, r.udp, m, err)
		}
	}
}

// rows is GET /api/history?limit=1000&instance=…: the status, and the
// count of rows per instance.
func (r *replica) rows(t *testing.T, instance string) (int, map[string]int) {
	t.Helper()
	resp, err := http.Get("http://" + r.admin + "/api/history?limit=1000&instance=" + instance)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Rows []struct {
			Instance string `json:"instance"`
		} `json:"rows"`
	}
	per := map[string]int{}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		for _, row := range page.Rows {
			per[row.Instance]++
		}
	}
	return resp.StatusCode, per
}

// Two nxdnsd processes write to one PostgreSQL database: /api/history on
// either shows both instances' rows, and instance= one's (the processes
// are stopped, which writes their queues, and started again, so that
// nothing waits for a batch by the clock). The database
// stopped under load delays and loses no query: the API says 503, DNS
// answers every query, and after the restart the rows of the outage are
// written without help (the writer's "writing resumed" line comes after
// them) and seen from the other replica.
func TestTwoReplicasShareAPostgresHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	pg := pgtest.Start(t)
	bin := buildBinary(t)
	up := wiretest.NewServer(t, wiretest.Answer())
	a := startReplica(t, bin, up.Addr, pg.URL(), "edge-a")
	b := startReplica(t, bin, up.Addr, pg.URL(), "edge-b")

	a.ask(t, "a", 40)
	b.ask(t, "b", 25)
	a.stop(t)
	b.stop(t)
	a = startReplica(t, bin, up.Addr, pg.URL(), "edge-a")
	b = startReplica(t, bin, up.Addr, pg.URL(), "edge-b")
	for _, r := range []*replica{a, b} {
		if code, got := r.rows(t, ""); code != 200 || !equal(got, map[string]int{"edge-a": 40, "edge-b": 25}) {
			t.Errorf("%s: %d %v, want both instances' rows", r.admin, code, got)
		}
		for instance, want := range map[string]map[string]int{"edge-a": {"edge-a": 40}, "edge-b": {"edge-b": 25}} {
			if code, got := r.rows(t, instance); code != 200 || !equal(got, want) {
				t.Errorf("%s: instance=%s: %d %v, want %v", r.admin, instance, code, got, want)
			}
		}
	}

	pg.Stop()
	a.ask(t, "down", 30) // every query answered while the database is down
	if code, _ := a.rows(t, ""); code != http.StatusServiceUnavailable {
		t.Errorf("/api/history with the database down: %d, want 503", code)
	}
	// The writer gathers rows for a moment before it writes: the database
	// comes back only once the writer has found it gone, or the rows of
	// the outage could be written after it without an outage seen.
	waitLog(t, a.lines, "history: the database is unreachable; rows wait in the queue, then are dropped and counted")
	pg.Restart()
	waitLog(t, a.lines, "history: the database is reachable again; writing resumed")
	if code, got := b.rows(t, "edge-a"); code != 200 || got["edge-a"] != 70 {
		t.Errorf("edge-a's rows after the outage, read on edge-b: %d %v, want 70", code, got)
	}
}

func equal(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
