package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every rule of [clients] and server.rebind_*: a case that breaks it, the
// exact paths reported, and valid edge cases (want nil).
func TestClientsAndRebindRules(t *testing.T) {
	t.Parallel()
	static := func(name, addrs string) string {
		return "\n[[clients.static]]\nname = " + quote(name) + "\naddresses = " + addrs + "\n"
	}
	tests := []struct {
		name, src string
		want      []string
	}{
		{"all valid", "[clients]\nhosts_files = [\"/etc/hosts\"]\nleases_files = [\"/var/lib/misc/dnsmasq.leases\"]\nreverse_lookup = false\n" +
			static("tablet", `["192.168.1.50", "fd00::50"]`) + static("tv.lan.", `["192.168.1.51"]`) + okUpstream, nil},
		{"empty file path", "[clients]\nhosts_files = [\"\"]" + okUpstream, []string{"clients.hosts_files[0]"}},
		{"file twice", "[clients]\nleases_files = [\"/a/leases\", \"/a/../a/leases\"]" + okUpstream, []string{"clients.leases_files[1]"}},
		{"name missing", static("", `["192.168.1.50"]`) + okUpstream, []string{"clients.static[0].name"}},
		{"name bad", static("my tablet", `["192.168.1.50"]`) + okUpstream, []string{"clients.static[0].name"}},
		{"name twice", static("tablet", `["192.168.1.50"]`) + static("Tablet", `["192.168.1.51"]`) + okUpstream, []string{"clients.static[1].name"}},
		{"no address", static("tablet", `[]`) + okUpstream, []string{"clients.static[0].addresses"}},
		{"bad addresses", static("tablet", `["192.168.1.0/24", "::ffff:192.168.1.5", "fe80::1%eth0", "192.168.1.9"]`) + okUpstream,
			[]string{"clients.static[0].addresses[0]", "clients.static[0].addresses[1]", "clients.static[0].addresses[2]"}},
		{"address twice", static("tablet", `["192.168.1.50"]`) + static("phone", `["192.168.1.51", "192.168.1.50"]`) + okUpstream,
			[]string{"clients.static[1].addresses[1]"}},
		{"unknown key", static("tablet", `["192.168.1.50"]`) + "mac = \"aa\"\n" + okUpstream, []string{"clients.static[0].mac"}},
		{"rebind_allow valid", "[server]\nrebind_allow = [\"plex.direct\", \"home.example.org.\"]" + okUpstream, nil},
		{"rebind_allow bad and twice", "[server]\nrebind_allow = [\"plex.direct\", \"bad name\", \"Plex.Direct.\"]" + okUpstream,
			[]string{"server.rebind_allow[1]", "server.rebind_allow[2]"}},
		{"rebind_protection not a boolean", "[server]\nrebind_protection = 1" + okUpstream, []string{"server.rebind_protection"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.src))
			assertPaths(t, pathsOf(t, cfg, err), tt.want, err)
		})
	}
}

func TestClientsParsed(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "[server]\nrebind_allow = [\"Plex.Direct\"]\n"+
		"[[clients.static]]\nname = \"tablet\"\naddresses = [\"192.168.1.50\", \"FD00::50\"]\n"+okUpstream)
	if got := cfg.Clients.Static[0].Addrs; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("192.168.1.50"), netip.MustParseAddr("fd00::50")}) {
		t.Errorf("Addrs = %v", got)
	}
	if !cfg.Server.RebindProtection || !slices.Equal(cfg.Server.RebindAllowNames, []string{"plex.direct."}) {
		t.Errorf("rebind: %v %q", cfg.Server.RebindProtection, cfg.Server.RebindAllowNames)
	}
	if !cfg.Clients.ReverseLookup {
		t.Error("reverse_lookup is off by default")
	}
}

// Relative hosts and leases files are the configuration file's
// neighbours, as ca_file is; a missing one is a warning, not an error.
func TestClientFilesRelativeAndWarned(t *testing.T) {
	t.Parallel()
	hosts := writeFile(t, "hosts", []byte("192.168.1.2 nas\n"))
	dir := filepath.Dir(hosts)
	conf := filepath.Join(dir, "nxdnsd.toml")
	if err := os.WriteFile(conf, []byte("[clients]\nhosts_files = [\"hosts\"]\nleases_files = [\"absent.leases\"]\n"+okUpstream), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clients.HostsFiles[0] != filepath.Join(dir, "hosts") {
		t.Errorf("hosts_files[0] = %q", cfg.Clients.HostsFiles[0])
	}
	ws := cfg.Warnings()
	if len(ws) != 1 || ws[0].Path != "clients.leases_files[0]" {
		t.Errorf("warnings %q, want one at clients.leases_files[0]", ws)
	}
}

// A pool upstream with a private address is named at start while
// protection is on: its answers for the home network's names lose their
// addresses.
func TestPrivateUpstreamWarning(t *testing.T) {
	t.Parallel()
	src := "[[upstreams]]\naddress = \"udp://192.168.1.1:53\"\n[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n" +
		"[[upstreams]]\naddress = \"tls://dns.home:853\"\nip = \"fd00::1\"\n[[upstreams]]\naddress = \"udp://127.0.0.1:5353\"\n"
	ws := mustParse(t, src).Warnings()
	var paths []string
	for _, w := range ws {
		paths = append(paths, w.Path)
	}
	assertPaths(t, paths, []string{"upstreams[0].address", "upstreams[2].address"}, ws)
	if ws := mustParse(t, "[server]\nrebind_protection = false\n"+src).Warnings(); len(ws) != 0 {
		t.Errorf("warnings with protection off: %q", ws)
	}
}
