package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// -check says one line when the file is valid, as unbound-checkconf and
// nginx -t do (it said nothing).
func TestCheckSaysValid(t *testing.T) {
	p := writeConfig(t, "[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n")
	code, out, errs := runArgs("-c", p, "-check")
	if want := "nxdnsd: the configuration " + p + " is valid\n"; code != 0 || out != want || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q and nothing", code, out, errs, want)
	}
}

// A cache.path in a directory that does not exist is a warning: -check
// prints it on stderr, says so on its line and exits 0.
func TestCheckWarnsCachePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	p := writeConfig(t, fmt.Sprintf("[cache]\npath = %q\n[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n", dir+"/cache"))
	code, out, errs := runArgs("-c", p, "-check")
	if code != 0 || !strings.HasSuffix(out, " is valid, with 1 warning\n") {
		t.Errorf("exit %d, stdout %q; want 0 and a line saying 1 warning", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "config: cache.path: warning: ") || !strings.Contains(lines[0], dir) {
		t.Errorf("stderr %q, want one line config: cache.path: warning: naming %s", errs, dir)
	}
}

// A file without [[upstreams]] runs on the embedded default's, and says
// so in -check's line and in the start-up log.
func TestNoUpstreamsSaidAtStart(t *testing.T) {
	p := writeConfig(t, "[server]\nlisten = [\"127.0.0.1:0\"]\n")
	code, out, errs := runArgs("-c", p, "-check")
	if code != 0 || !strings.Contains(out, "the embedded default's quad9, cloudflare") || errs != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 naming the default upstreams", code, out, errs)
	}
	cfg, err := loadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	logStart(zap.New(core), p, cfg, cfg.Warnings())
	es := logs.FilterMessage("the configuration names no upstream: using the embedded default's").All()
	if len(es) != 1 || fmt.Sprint(es[0].ContextMap()["upstreams"]) != "[quad9 cloudflare]" {
		t.Errorf("start-up log %v, want one line naming quad9 and cloudflare", logs.All())
	}
	// The embedded default itself names its upstreams: nothing to say.
	def, _ := loadConfig("")
	core, logs = observer.New(zapcore.InfoLevel)
	logStart(zap.New(core), "", def, nil)
	if n := logs.FilterMessage("the configuration names no upstream: using the embedded default's").Len(); n != 0 {
		t.Errorf("the embedded default logged %d lines about default upstreams", n)
	}
}

// A file that cannot be read is one line, "config: " once (it was
// "config: config: open …").
func TestMissingFileOneLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.toml")
	code, out, errs := runArgs("-c", p, "-check")
	want := "config: open " + p + ": no such file or directory\n"
	if code != 2 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, want)
	}
}

// A listen address another program holds: nxdnsd exits 1 with an error
// that names the address and docs/install.md's section, logged without a
// Go stack trace; the section exists, and quotes the error's words.
func TestPortTakenNamesTheDoc(t *testing.T) {
	held, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.LocalAddr().String()
	up := wiretest.NewServer(t, wiretest.Answer())
	p := writeConfig(t, fmt.Sprintf("[server]\nlisten = [%q]\n[admin]\nlisten = \"\"\n[[upstreams]]\naddress = \"udp://%s\"\n", taken, up.Addr))
	code, _, errs := runArgs("-c", p)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailed, errs)
	}
	var failed map[string]any
	for _, l := range strings.Split(errs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "nxdnsd failed" {
			failed = m
		}
		if strings.Contains(l, `"stacktrace"`) {
			t.Errorf("a log line carries a stack trace: %s", l)
		}
	}
	if failed == nil {
		t.Fatalf("no 'nxdnsd failed' line in:\n%s", errs)
	}
	msg, _ := failed["error"].(string)
	for _, want := range []string{"udp " + taken, "the address is taken", `"` + server.PortTakenSection + `" in docs/install.md`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}

	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "\n## "+server.PortTakenSection+"\n") {
		t.Errorf("docs/install.md has no section %q", "## "+server.PortTakenSection)
	}
	for _, words := range []string{"the address is taken", "systemd-resolved, dnsmasq or pihole-FTL", "ss -lntup 'sport = :53'"} {
		if !strings.Contains(string(doc), words) {
			t.Errorf("docs/install.md does not quote the error's %q", words)
		}
	}
}
