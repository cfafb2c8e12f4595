package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestHelpExitsZero(t *testing.T) {
	code, out, errs := runArgs("-h")
	if code != 0 || !strings.Contains(out, "Usage: nxdnsd") || !strings.Contains(out, "-check") || errs != "" {
		t.Errorf("-h: exit %d, stdout %q, stderr %q; want 0 with the usage on stdout", code, out, errs)
	}
	code, out, errs = runArgs("-nosuchflag")
	if code != 2 || out != "" || !strings.Contains(errs, "-nosuchflag") || !strings.Contains(errs, "Usage: nxdnsd") {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q; want 2 with the usage on stderr", code, out, errs)
	}
}

// systemd's side of a Type=notify service with its stderr on journald: the
// binary started with NOTIFY_SOCKET on a socket of the test and
// JOURNAL_STREAM naming its stderr. READY=1 comes once the listeners are
// bound (it names their ports, which exist only after the bind, and a query
// sent at once is answered); a SIGHUP is RELOADING=1 then READY=1, a valid
// file applied and an invalid one refused; SIGTERM says STOPPING=1; every
// stderr line starts with its syslog priority.
func TestSystemdNotifyAndJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	up := wiretest.NewServer(t, wiretest.Answer())
	config := func(nas string) string {
		return fmt.Sprintf(`
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = ""
[[upstreams]]
address = "udp://%s"
[[local_records]]
name = "nas.home."
type = "A"
value = %q
`, up.Addr, nas)
	}
	cfg := writeConfig(t, config("192.168.1.10"))
	sock := filepath.Join(t.TempDir(), "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stderrR.Close()

	cmd := exec.Command(buildBinary(t), "-c", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "JOURNAL_STREAM="+streamID(t, stderrW))
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderrW.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan []string, 1)
	go func() {
		var ls []string
		sc := bufio.NewScanner(stderrR)
		for sc.Scan() {
			ls = append(ls, sc.Text())
		}
		lines <- ls
	}()

	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = notify.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound for a broken binary, not a wait for timing
		n, err := notify.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	ready := regexp.MustCompile(`^READY=1\nSTATUS=serving DNS: udp (127\.0\.0\.1:\d+); tcp 127\.0\.0\.1:\d+`)
	m := ready.FindStringSubmatch(next())
	if m == nil || strings.HasSuffix(m[1], ":0") {
		t.Fatalf("the first notification is not READY=1 with the bound addresses: %q", m)
	}
	addr := m[1]
	nas := func() string {
		t.Helper()
		c := &dns.Client{Timeout: 5 * time.Second}
		r, _, err := c.Exchange(wiretest.Query("nas.home.", dns.TypeA), addr)
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("nas.home.: %v %v", r, err)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	if got := nas(); got != "192.168.1.10" {
		t.Errorf("right after READY=1: %s", got)
	}

	reloadWith := func(src string) string {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if msg := next(); !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=\d+$`).MatchString(msg) {
			t.Fatalf("a reload begins with %q", msg)
		}
		msg := next()
		if !strings.HasPrefix(msg, "READY=1\nSTATUS=serving DNS: udp "+addr) {
			t.Fatalf("a reload ends with %q", msg)
		}
		return msg
	}
	if msg := reloadWith(config("192.168.1.20")); strings.Contains(msg, "failed") {
		t.Errorf("a valid reload: %q", msg)
	}
	if got := nas(); got != "192.168.1.20" {
		t.Errorf("after the reload: %s, want the new 192.168.1.20", got)
	}
	if msg := reloadWith(config("not an address")); !strings.Contains(msg, "the last reload failed") {
		t.Errorf("an invalid reload: %q", msg)
	}
	if got := nas(); got != "192.168.1.20" {
		t.Errorf("after the invalid reload: %s, want the running 192.168.1.20", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if msg := next(); msg != "STOPPING=1" {
		t.Errorf("at SIGTERM: %q", msg)
	}
	stderr := <-lines
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}

	priority := map[string]string{"debug": "<7>", "info": "<6>", "warn": "<4>", "error": "<3>"}
	seen := map[string]string{}
	for _, l := range stderr {
		var v struct{ Level, Msg string }
		p, rest, ok := strings.Cut(l, ">")
		if !ok || json.Unmarshal([]byte(rest), &v) != nil {
			t.Errorf("not a priority and a JSON line: %q", l)
			continue
		}
		if p+">" != priority[v.Level] {
			t.Errorf("a %s line with priority %s>: %q", v.Level, p, l)
		}
		seen[v.Msg] = p + ">"
	}
	for msg, want := range map[string]string{"nxdnsd started": "<6>", "configuration reloaded": "<6>", "reload: configuration problem": "<3>"} {
		if seen[msg] != want {
			t.Errorf("%q: priority %q, want %s", msg, seen[msg], want)
		}
	}
}
