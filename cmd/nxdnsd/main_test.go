package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeConfig(tb testing.TB, src string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "nxdns.toml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestVersion(t *testing.T) {
	code, out, _ := runArgs("-version")
	if code != 0 || !strings.HasPrefix(out, "nxdnsd ") {
		t.Errorf("exit %d, output %q", code, out)
	}
	// Version, commit and Go version, on one line.
	for _, want := range []string{version, "commit ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q does not contain %q", out, want)
		}
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("output %q is not one line", out)
	}
}

// What go tool task release stamps with -ldflags -X is what -version
// prints.
func TestVersionStamped(t *testing.T) {
	v, c := version, commit
	t.Cleanup(func() { version, commit = v, c })
	version, commit = "v1.2.3-4-gabcdef0", "abcdef0123456789abcdef0123456789abcdef01"
	code, out, _ := runArgs("-version")
	want := fmt.Sprintf("nxdnsd v1.2.3-4-gabcdef0 (commit abcdef0123456789abcdef0123456789abcdef01, %s, %s/%s)\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if code != 0 || out != want {
		t.Errorf("exit %d, output %q, want 0 and %q", code, out, want)
	}
}

func TestCheckEmbeddedDefault(t *testing.T) {
	if code, _, errs := runArgs("-check"); code != 0 {
		t.Errorf("the embedded default fails -check (exit %d): %s", code, errs)
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	p := writeConfig(t, `
[upstream]
attempt_timeout_ms = 3000
total_timeout_ms = 1000
[[upstreams]]
address = "udp://9.9.9.9:53"
[[upstreams]]
address = "carrier-pigeon://9.9.9.9"
slots = 0
`)
	code, _, errs := runArgs("-c", p, "-check")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	want := []string{"config: upstream.total_timeout_ms:", "config: upstreams[1].address:", "config: upstreams[1].slots:"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want prefix %q", i, lines[i], w)
		}
	}
}

// A valid configuration with an upstream nothing can look up passes
// -check, which says so at the upstream's ip.
func TestCheckWarnsOfAnUnresolvableUpstream(t *testing.T) {
	p := writeConfig(t, "[[upstreams]]\naddress = \"tls://dns.example:853\"\n")
	code, _, errs := runArgs("-c", p, "-check")
	if code != 0 || !strings.HasPrefix(errs, "config: upstreams[0].ip: warning: ") || strings.Count(errs, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 0 and one warning at upstreams[0].ip", code, errs)
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	p := writeConfig(t, "[server]\nlisten = [\"127.0.0.1:5353\"]\nlisen = 1\n")
	code, _, errs := runArgs("-c", p, "-check")
	if code != 2 || !strings.Contains(errs, "config: server.lisen:") {
		t.Errorf("exit %d, stderr %q, want 2 naming server.lisen", code, errs)
	}
	// Starting refuses it too, before listening on anything.
	code, _, errs = runArgs("-c", p)
	if code != 2 || !strings.Contains(errs, "server.lisen") {
		t.Errorf("start: exit %d, stderr %q", code, errs)
	}
}

// buildBinary compiles nxdnsd once for the tests that run it as a process.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "nxdnsd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SIGTERM with a query in flight: the query is answered, the process
// exits 0.
func TestSIGTERMFinishesQueriesInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	received := make(chan string, 1)
	release := make(chan struct{})
	up := wiretest.NewServer(t, wiretest.Notify(received, wiretest.Gate(release, wiretest.Answer(wiretest.A("slow.example.", 0)))))
	cfg := writeConfig(t, fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = ""
[[upstreams]]
address = "udp://%s"
`, up.Addr))

	cmd := exec.Command(buildBinary(t), "-c", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// The "nxdnsd started" log line says where it listens.
	lines := bufio.NewScanner(stderr)
	var udpAddr string
	for udpAddr == "" && lines.Scan() {
		var l struct {
			Msg string   `json:"msg"`
			UDP []string `json:"udp"`
		}
		if json.Unmarshal(lines.Bytes(), &l) == nil && l.Msg == "nxdnsd started" {
			udpAddr = l.UDP[0]
		}
	}
	if udpAddr == "" {
		t.Fatal("no 'nxdnsd started' log line")
	}
	go func() { // keep draining the logs so the process never blocks on them
		for lines.Scan() {
		}
	}()

	answer := make(chan error, 1)
	go func() {
		c := &dns.Client{Timeout: 5 * time.Second}
		r, _, err := c.Exchange(wiretest.Query("slow.example.", dns.TypeA), udpAddr)
		if err == nil && (r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1) {
			err = fmt.Errorf("rcode %s with %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		answer <- err
	}()
	<-received // the query is in flight at the upstream
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-answer; err != nil {
		t.Errorf("the query in flight at SIGTERM: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
}
