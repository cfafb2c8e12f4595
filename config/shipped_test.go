package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The configuration the archive and the Debian package ship saves the
// cache in the state directory that the unit both ship asks systemd for
// (the archive's unit had none, so every shutdown failed to save it),
// (as the block lists' copies, blocking.state_dir, and the query
// history, history.path), and serves both address families.
func TestShippedConfigurationAgreesWithTheUnit(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../deploy/nxdns.toml")
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../deploy/nxdnsd.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(cfg.Cache.Path)
	state, ok := strings.CutPrefix(dir, "/var/lib/")
	if !ok || state == "" || strings.Contains(state, "/") {
		t.Fatalf("cache.path = %q, want a file in a directory of /var/lib", cfg.Cache.Path)
	}
	if !strings.Contains(string(unit), "\nStateDirectory="+state+"\n") {
		t.Errorf("deploy/nxdnsd.service has no StateDirectory=%s for cache.path %q", state, cfg.Cache.Path)
	}
	if lists, ok := strings.CutPrefix(cfg.Blocking.StateDir, "/var/lib/"+state+"/"); !ok || lists == "" {
		t.Errorf("blocking.state_dir = %q, want a directory under the unit's StateDirectory /var/lib/%s", cfg.Blocking.StateDir, state)
	}
	if !cfg.History.Enabled || filepath.Dir(cfg.History.Path) != "/var/lib/"+state {
		t.Errorf("history.path = %q (enabled %v), want a file in the unit's StateDirectory /var/lib/%s", cfg.History.Path, cfg.History.Enabled, state)
	}
	assertBothFamilies(t, "deploy/nxdns.toml", cfg.Server.Listen)
}

// The README's minimal example is valid and serves IPv4 and IPv6 (it
// listed 0.0.0.0:53 alone, which serves IPv4 only).
func TestREADMEExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "A minimal file,")
	_, rest, ok := strings.Cut(rest, "```toml\n")
	if !ok {
		t.Fatal("README.md has no \"A minimal file,\" followed by a toml block")
	}
	example, _, _ := strings.Cut(rest, "```")
	cfg, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("the README's example:\n%v", err)
	}
	assertBothFamilies(t, "README.md's example", cfg.Server.Listen)
}

func assertBothFamilies(tb testing.TB, what string, listen []string) {
	tb.Helper()
	var v4, v6 bool
	for _, l := range listen {
		a := netip.MustParseAddrPort(l).Addr()
		v4 = v4 || a.Is4()
		v6 = v6 || a.Is6()
	}
	if !v4 || !v6 {
		tb.Errorf("%s listens on %q: want an IPv4 and an IPv6 address", what, listen)
	}
}
