package config

import (
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
)

// TestRules has, for every validation rule, a case that breaks it and the
// exact paths reported, next to valid edge cases that must pass (want nil).
func TestRules(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	notPEM := writeFile(t, "not.pem", []byte("not a certificate\n"))
	keyOnly := writeFile(t, "key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	badCert := writeFile(t, "bad.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}))

	tlsWith := func(key, value string) string {
		return "[[upstreams]]\naddress = \"tls://dns.example:853\"\n" + key + " = " + value + "\n"
	}
	udpWith := func(key, value string) string {
		return "[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n" + key + " = " + value + "\n"
	}
	zone := func(zone, resolver string) string {
		return okUpstream + "[[forward_zones]]\nzone = " + quote(zone) + "\nresolver = " + quote(resolver) + "\n"
	}
	record := func(name, typ, value string) string {
		return fmt.Sprintf("\n[[local_records]]\nname = %s\ntype = %s\nvalue = %s\n", quote(name), quote(typ), quote(value))
	}

	tests := []struct {
		name, src string
		want      []string
	}{
		// [server]
		{"listen empty", "[server]\nlisten = []" + okUpstream, []string{"server.listen"}},
		{"listen hostname", "[server]\nlisten = [\"localhost:53\"]" + okUpstream, []string{"server.listen[0]"}},
		{"listen without port", "[server]\nlisten = [\"127.0.0.1:53\", \"127.0.0.2\"]" + okUpstream, []string{"server.listen[1]"}},
		{"listen without host", "[server]\nlisten = [\":53\"]" + okUpstream, []string{"server.listen[0]"}},
		{"listen IPv6 without brackets", "[server]\nlisten = [\"::1:53\"]" + okUpstream, []string{"server.listen[0]"}},
		{"listen twice", "[server]\nlisten = [\"[::1]:53\", \"127.0.0.1:53\", \"[::1]:53\"]" + okUpstream, []string{"server.listen[2]"}},
		{"listen port 0 twice", "[server]\nlisten = [\"127.0.0.1:0\", \"127.0.0.1:0\"]" + okUpstream, nil},
		{"tcp idle 0", "[server]\ntcp_idle_timeout_ms = 0" + okUpstream, []string{"server.tcp_idle_timeout_ms"}},
		{"tcp idle too long", "[server]\ntcp_idle_timeout_ms = 2147483648" + okUpstream, []string{"server.tcp_idle_timeout_ms"}},
		{"max tcp connections 0", "[server]\nmax_tcp_connections = 0" + okUpstream, []string{"server.max_tcp_connections"}},
		{"allow not a prefix", "[server]\nallow = [\"10.0.0.0/8\", \"192.168.1.1\", \"fd00::/8\", \"10.0.0.0/33\"]" + okUpstream, []string{"server.allow[1]", "server.allow[3]"}},
		{"allow empty", "[server]\nallow = []" + okUpstream, nil},
		{"allow IPv4-mapped", "[server]\nallow = [\"::ffff:0:0/96\", \"::ffff:10.0.0.0/104\", \"::/0\", \"::ffff:0:0/95\"]" + okUpstream, []string{"server.allow[0]", "server.allow[1]"}},
		{"listen IPv4-mapped", "[server]\nlisten = [\"[::ffff:127.0.0.1]:1058\"]" + okUpstream, []string{"server.listen[0]"}},
		{"admin listen IPv4-mapped", "[admin]\nlisten = \"[::ffff:127.0.0.1]:8053\"" + okUpstream, []string{"admin.listen"}},
		{"listen both families", "[server]\nlisten = [\"0.0.0.0:53\", \"[::]:53\", \"127.0.0.1:1053\", \"[::1]:1053\"]" + okUpstream, nil},
		{"max concurrent queries negative", "[server]\nmax_concurrent_queries = -1" + okUpstream, []string{"server.max_concurrent_queries"}},

		// [upstream]
		{"attempt 0", "[upstream]\nattempt_timeout_ms = 0" + okUpstream, []string{"upstream.attempt_timeout_ms"}},
		{"total 0", "[upstream]\ntotal_timeout_ms = 0" + okUpstream, []string{"upstream.total_timeout_ms"}},
		{"total below attempt", "[upstream]\nattempt_timeout_ms = 3000\ntotal_timeout_ms = 2999" + okUpstream, []string{"upstream.total_timeout_ms"}},
		{"total equals attempt", "[upstream]\nattempt_timeout_ms = 3000\ntotal_timeout_ms = 3000" + okUpstream, nil},
		{"read 0", "[upstream]\nread_timeout_ms = 0" + okUpstream, []string{"upstream.read_timeout_ms"}},
		{"failure threshold 0", "[upstream]\nfailure_threshold = 0" + okUpstream, []string{"upstream.failure_threshold"}},
		{"backoff 0", "[upstream]\nbackoff_ms = 0" + okUpstream, []string{"upstream.backoff_ms"}},
		{"backoff max below backoff", "[upstream]\nbackoff_ms = 2000\nbackoff_max_ms = 1999" + okUpstream, []string{"upstream.backoff_max_ms"}},
		{"backoff max equals backoff", "[upstream]\nbackoff_ms = 2000\nbackoff_max_ms = 2000" + okUpstream, nil},
		{"probe timeout 0", "[upstream]\nprobe_timeout_ms = 0" + okUpstream, []string{"upstream.probe_timeout_ms"}},
		{"probe timeout negative", "[upstream]\nprobe_timeout_ms = -1" + okUpstream, []string{"upstream.probe_timeout_ms"}},
		{"probe timeout 1", "[upstream]\nprobe_timeout_ms = 1" + okUpstream, nil},

		// [cache]
		{"cache size 0", "[cache]\nsize_mib = 0" + okUpstream, []string{"cache.size_mib"}},
		{"cache size 0 when off", "[cache]\nenabled = false\nsize_mib = 0" + okUpstream, nil},
		{"cache size huge", "[cache]\nsize_mib = 65537" + okUpstream, []string{"cache.size_mib"}},
		{"cache min above max", "[cache]\nmin_ttl_s = 61\nmax_ttl_s = 60" + okUpstream, []string{"cache.min_ttl_s"}},
		{"cache min equals max", "[cache]\nmin_ttl_s = 60\nmax_ttl_s = 60" + okUpstream, nil},
		{"cache negative ttls", "[cache]\nnegative_max_ttl_s = -1\nfailure_ttl_s = -1\nstale_max_age_s = -1\nstale_answer_ttl_s = -1" + okUpstream,
			[]string{"cache.negative_max_ttl_s", "cache.failure_ttl_s", "cache.stale_max_age_s", "cache.stale_answer_ttl_s"}},
		{"cache failure ttl 0", "[cache]\nfailure_ttl_s = 0" + okUpstream, nil},
		{"cache stale client timeout 0", "[cache]\nstale_client_timeout_ms = 0" + okUpstream, []string{"cache.stale_client_timeout_ms"}},
		{"cache path in a missing directory", "[cache]\npath = \"/nonexistent/nxdnsd/cache\"" + okUpstream, nil},
		{"cache path a directory", "[cache]\npath = " + quote(t.TempDir()) + okUpstream, []string{"cache.path"}},
		{"cache path in an existing directory", "[cache]\npath = " + quote(t.TempDir()+"/cache") + okUpstream, nil},

		// [[upstreams]]
		{"no upstreams: the embedded default's", "", nil},
		{"empty upstreams array", "upstreams = []", []string{"upstreams"}},
		{"all disabled", udpWith("enabled", "false"), []string{"upstreams"}},
		{"address missing", "[[upstreams]]\nname = \"x\"", []string{"upstreams[0].address"}},
		{"address unknown scheme", okUpstream + "[[upstreams]]\naddress = \"quic://9.9.9.9:853\"", []string{"upstreams[1].address"}},
		{"address udp hostname", "[[upstreams]]\naddress = \"udp://dns.quad9.net:53\"", []string{"upstreams[0].address"}},
		{"address without scheme", "[[upstreams]]\naddress = \"9.9.9.9\"", []string{"upstreams[0].address"}},
		{"ip on udp", udpWith("ip", "\"9.9.9.9\""), []string{"upstreams[0].ip"}},
		{"ip not an IP", tlsWith("ip", "\"dns.quad9.net\""), []string{"upstreams[0].ip"}},
		{"ip on tls", tlsWith("ip", "\"2620:fe::fe\""), nil},
		{"ca_file on tcp", "[[upstreams]]\naddress = \"tcp://9.9.9.9:53\"\nca_file = " + quote(ca), []string{"upstreams[0].ca_file"}},
		{"ca_file missing", tlsWith("ca_file", quote(ca+".absent")), []string{"upstreams[0].ca_file"}},
		{"ca_file not PEM", tlsWith("ca_file", quote(notPEM)), []string{"upstreams[0].ca_file"}},
		{"ca_file without certificate", tlsWith("ca_file", quote(keyOnly)), []string{"upstreams[0].ca_file"}},
		{"ca_file broken certificate", tlsWith("ca_file", quote(badCert)), []string{"upstreams[0].ca_file"}},
		{"ca_file on https", "[[upstreams]]\naddress = \"https://dns.example/dns-query\"\nca_file = " + quote(ca), nil},
		{"name duplicate", udpWith("name", "\"a\"") + "[[upstreams]]\nname = \"a\"\naddress = \"udp://1.1.1.1:53\"", []string{"upstreams[1].name"}},
		{"name duplicate by address", okUpstream + okUpstream, []string{"upstreams[1].name"}},
		{"same address, distinct names", udpWith("name", "\"a\"") + udpWith("name", "\"b\""), nil},
		{"name empty", udpWith("name", "\"\""), []string{"upstreams[0].name"}},
		{"slots 0", udpWith("slots", "0"), []string{"upstreams[0].slots"}},
		{"slots 4097", udpWith("slots", "4097"), []string{"upstreams[0].slots"}},
		{"slots 1 and 4096", udpWith("slots", "1") + "[[upstreams]]\naddress = \"udp://1.1.1.1:53\"\nslots = 4096", nil},
		{"disabled entries are still checked", okUpstream + "[[upstreams]]\naddress = \"udp://x:53\"\nenabled = false", []string{"upstreams[1].address"}},

		// [[forward_zones]]
		{"zone empty label", zone("a..lan", "192.0.2.1:53"), []string{"forward_zones[0].zone"}},
		{"zone with space", zone("my lan", "192.0.2.1:53"), []string{"forward_zones[0].zone"}},
		{"zone missing", okUpstream + "[[forward_zones]]\nresolver = \"192.0.2.1\"", []string{"forward_zones[0].zone"}},
		{"zone duplicate", zone("lan", "192.0.2.1:53") + "[[forward_zones]]\nzone = \"LAN.\"\nresolver = \"192.0.2.2:53\"", []string{"forward_zones[1].zone"}},
		{"resolver hostname", zone("lan.", "router.lan:53"), []string{"forward_zones[0].resolver"}},
		{"resolver missing", okUpstream + "[[forward_zones]]\nzone = \"lan.\"", []string{"forward_zones[0].resolver"}},
		{"resolver port 0", zone("lan.", "192.0.2.1:0"), []string{"forward_zones[0].resolver"}},
		{"resolver IPv6 without brackets", zone("lan.", "fd00::1"), []string{"forward_zones[0].resolver"}},
		{"resolver IPv4 in brackets", zone("lan.", "[192.0.2.1]"), []string{"forward_zones[0].resolver"}},
		{"resolver IPv6 in brackets, no port", zone("lan.", "[fd00::1]"), nil},
		{"root zone", zone(".", "192.0.2.1:53"), nil},

		// [[local_records]]
		{"record name invalid", okUpstream + record("a..lan", "A", "192.0.2.1"), []string{"local_records[0].name"}},
		{"record name non-ASCII", okUpstream + record("nås.lan", "A", "192.0.2.1"), []string{"local_records[0].name"}},
		{"record type unknown", okUpstream + record("a.lan", "MX", "10 mx.lan."), []string{"local_records[0].type"}},
		{"record type missing", okUpstream + "[[local_records]]\nname = \"a.lan\"\nvalue = \"x\"", []string{"local_records[0].type"}},
		{"A with IPv6", okUpstream + record("a.lan", "A", "fd00::1"), []string{"local_records[0].value"}},
		{"A with IPv4-mapped IPv6", okUpstream + record("a.lan", "A", "::ffff:192.0.2.1"), []string{"local_records[0].value"}},
		{"AAAA with IPv4", okUpstream + record("a.lan", "AAAA", "192.0.2.1"), []string{"local_records[0].value"}},
		{"CNAME not a name", okUpstream + record("a.lan", "CNAME", "b..lan"), []string{"local_records[0].value"}},
		{"PTR empty", okUpstream + record("1.2.0.192.in-addr.arpa", "PTR", ""), []string{"local_records[0].value"}},
		{"TXT empty", okUpstream + record("a.lan", "TXT", ""), []string{"local_records[0].value"}},
		{"TXT 256 bytes", okUpstream + record("a.lan", "TXT", strings.Repeat("x", 256)), []string{"local_records[0].value"}},
		{"TXT 255 bytes", okUpstream + record("a.lan", "TXT", strings.Repeat("x", 255)), nil},
		{"lower-case type", okUpstream + record("a.lan", "aaaa", "fd00::1"), nil},
		{"ttl negative", okUpstream + record("a.lan", "A", "192.0.2.1") + "ttl = -1", []string{"local_records[0].ttl"}},
		{"ttl above 2^31-1", okUpstream + record("a.lan", "A", "192.0.2.1") + "ttl = 2147483648", []string{"local_records[0].ttl"}},
		{"ttl 2^31-1", okUpstream + record("a.lan", "A", "192.0.2.1") + "ttl = 2147483647", nil},
		{"record duplicate", okUpstream + record("a.lan", "A", "192.0.2.1") + record("A.LAN.", "a", "192.0.2.1"), []string{"local_records[1]"}},
		{"CNAME beside A", okUpstream + record("a.lan", "A", "192.0.2.1") + record("a.lan.", "CNAME", "b.lan"), []string{"local_records[1]"}},
		{"A beside CNAME", okUpstream + record("a.lan", "CNAME", "b.lan") + record("a.lan.", "A", "192.0.2.1"), []string{"local_records[1]"}},
		{"two A records", okUpstream + record("a.lan", "A", "192.0.2.1") + record("a.lan", "A", "192.0.2.2"), nil},
		{"two CNAMEs", okUpstream + record("a.lan", "CNAME", "b.lan") + record("A.lan.", "CNAME", "c.lan"), []string{"local_records[1]"}},

		// [admin], [log], [query_log]
		{"admin listen hostname", "[admin]\nlisten = \"localhost:8053\"" + okUpstream, []string{"admin.listen"}},
		{"admin listen on a DNS listener", "[server]\nlisten = [\"127.0.0.1:53\"]\n[admin]\nlisten = \"127.0.0.1:53\"" + okUpstream, []string{"admin.listen"}},
		{"recent queries off", "[admin]\nrecent_queries = 0" + okUpstream, nil},
		{"recent queries negative", "[admin]\nrecent_queries = -1" + okUpstream, []string{"admin.recent_queries"}},
		{"recent queries too many", "[admin]\nrecent_queries = 100001" + okUpstream, []string{"admin.recent_queries"}},
		{"admin hosts names and IPs", "[admin]\nhosts = [\"nxdns.lan\", \"NXDNS.lan.\", \"router\", \"192.168.1.2\", \"fd00::53\", \"[::1]\", \"xn--bcher-kva.example\"]" + okUpstream, nil},
		{"admin hosts empty", "[admin]\nhosts = []" + okUpstream, nil},
		{"admin hosts bad", "[admin]\nhosts = [\"ok.lan\", \"\", \"nxdns.lan:8053\", \"http://nxdns.lan\", \"-x.lan\", \"a..b\", \"fe80::1%eth0\", \"under_score.lan\", \"192.168.1.2:80\"]" + okUpstream,
			[]string{"admin.hosts[1]", "admin.hosts[2]", "admin.hosts[3]", "admin.hosts[4]", "admin.hosts[5]", "admin.hosts[6]", "admin.hosts[7]", "admin.hosts[8]"}},
		{"log level unknown", "[log]\nlevel = \"verbose\"" + okUpstream, []string{"log.level"}},
		{"log level upper-case", "[log]\nlevel = \"WARN\"" + okUpstream, nil},
		{"query log in a missing directory", "[query_log]\npath = \"relative/q.log\"" + okUpstream, []string{"query_log.path"}},
		{"query log on stdout", "[query_log]\npath = \"-\"" + okUpstream, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.src))
			assertPaths(t, pathsOf(t, cfg, err), tt.want, err)
		})
	}
}

// upstreamList is n [[upstreams]] entries of which the first disabled are
// disabled.
func upstreamList(n, disabled int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[[upstreams]]\naddress = \"udp://10.0.%d.%d:53\"\n", i/256, i%256)
		if i < disabled {
			b.WriteString("enabled = false\n")
		}
	}
	return b.String()
}

func TestEnabledUpstreamLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		n, disabled int
		message     string // of the only problem; "" when valid
	}{
		{"64 enabled", 64, 0, ""},
		{"65 enabled", 65, 0, "too many enabled upstreams (65 > 64)"},
		{"65 listed, one disabled", 65, 1, ""},
		{"100 listed, 36 disabled", 100, 36, ""},
		{"100 listed, 30 disabled", 100, 30, "too many enabled upstreams (70 > 64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(upstreamList(tt.n, tt.disabled)))
			if tt.message == "" {
				if err != nil {
					t.Fatalf("want valid, got:\n%v", err)
				}
				if len(cfg.Upstreams) != tt.n {
					t.Errorf("%d upstreams, want %d", len(cfg.Upstreams), tt.n)
				}
				return
			}
			want := Problems{{Path: "upstreams", Message: tt.message}}
			if ps := problemsOf(t, err); len(ps) != 1 || ps[0] != want[0] {
				t.Errorf("problems = %+v, want %+v", ps, want)
			}
		})
	}
}

// Problems from every section arrive together, in section order, and an
// address problem does not hide the ip and ca_file problems beside it.
func TestAllProblemsReported(t *testing.T) {
	t.Parallel()
	src := `
[server]
listen = []
max_concurrent_queries = 0
[upstream]
attempt_timeout_ms = -5
read_timeout_ms = 0
[[upstreams]]
name = "a"
address = "tls://dns.example:65536"
ip = "not-an-ip"
ca_file = "/nonexistent/ca.pem"
slots = 5000
[[upstreams]]
name = "a"
address = "udp://192.0.2.1:53"
enabled = false
[[forward_zones]]
zone = ""
resolver = "x"
[[local_records]]
name = "a.lan"
type = "A"
value = "x"
ttl = -1
[admin]
listen = "8053"
[log]
level = ""
`
	want := []string{
		"server.listen", "server.max_concurrent_queries",
		"upstream.attempt_timeout_ms", "upstream.read_timeout_ms",
		"upstreams[0].address", "upstreams[0].ip", "upstreams[0].slots", "upstreams[0].ca_file",
		"upstreams[1].name",
		"forward_zones[0].zone", "forward_zones[0].resolver",
		"local_records[0].value", "local_records[0].ttl",
		"admin.listen", "log.level",
	}
	cfg, err := Parse([]byte(src))
	assertPaths(t, pathsOf(t, cfg, err), want, err)
}

func TestValidateBuiltInCode(t *testing.T) {
	t.Parallel()
	cfg := Default()
	ps := problemsOf(t, cfg.Validate())
	if len(ps) != 1 || ps[0].Path != "upstreams" {
		t.Errorf("Default().Validate() = %+v, want only the missing upstreams", ps)
	}
	cfg.Upstreams = []Upstream{{Name: "q", Address: "tls://dns.quad9.net:853", Slots: 1}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestProblemsError(t *testing.T) {
	t.Parallel()
	ps := Problems{
		{Path: "upstreams", Message: "too many enabled upstreams (65 > 64)"},
		{Path: "upstreams[3].address", Message: "is required"},
		{Message: "line 3: expected value"},
	}
	want := "config: upstreams: too many enabled upstreams (65 > 64)\n" +
		"config: upstreams[3].address: is required\n" +
		"config: line 3: expected value"
	if got := ps.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
}

// A mapped prefix is refused with its IPv4 form, which is what matches.
func TestAllowMappedNamesIPv4Form(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("[server]\nallow = [\"::ffff:192.168.0.0/112\"]" + okUpstream))
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "write it as 192.168.0.0/16") {
		t.Errorf("problems = %v, want one naming 192.168.0.0/16", ps)
	}
	_, err = Parse([]byte("[server]\nlisten = [\"[::ffff:127.0.0.1]:1058\"]" + okUpstream))
	ps = problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "write 127.0.0.1:1058") {
		t.Errorf("problems = %v, want one naming 127.0.0.1:1058", ps)
	}
}

// A file naming no upstream takes the embedded default's, and says so; a
// file with upstreams keeps its own, even when every one is disabled
// (refused, as TestRules shows).
func TestNoUpstreamsTakesTheDefaults(t *testing.T) {
	t.Parallel()
	def, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	if def.UpstreamsFromDefault {
		t.Error("the embedded default, which lists its upstreams, is marked as taking them from the default")
	}
	cfg := mustParse(t, "[server]\nlisten = [\"127.0.0.1:0\"]\n")
	if !cfg.UpstreamsFromDefault {
		t.Error("UpstreamsFromDefault is false for a file without [[upstreams]]")
	}
	if len(cfg.Upstreams) != len(def.Upstreams) {
		t.Fatalf("%d upstreams, want the default's %d", len(cfg.Upstreams), len(def.Upstreams))
	}
	for i, u := range cfg.Upstreams {
		d := def.Upstreams[i]
		if u.Name != d.Name || u.Address != d.Address || u.Addr != d.Addr || u.DialIP != d.DialIP || u.Slots != d.Slots {
			t.Errorf("upstreams[%d] = %+v, want the default's %+v", i, u, d)
		}
	}
	// Each configuration gets its own slice.
	cfg.Upstreams[0].Name = "changed"
	if again := mustParse(t, ""); again.Upstreams[0].Name != def.Upstreams[0].Name {
		t.Errorf("a change to one configuration's default upstreams shows in the next: %q", again.Upstreams[0].Name)
	}
	if own := mustParse(t, okUpstream); own.UpstreamsFromDefault || len(own.Upstreams) != 1 {
		t.Errorf("a file with one upstream: UpstreamsFromDefault %v, %d upstreams", own.UpstreamsFromDefault, len(own.Upstreams))
	}
}

// cache.path in a directory that does not exist is valid (systemd makes
// the state directory at start) but warned about; in one that exists, or
// with the cache off, it is not.
func TestCachePathWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, "plain", []byte("x"))
	tests := []struct {
		name, src string
		warn      bool
	}{
		{"missing directory", "[cache]\npath = " + quote(dir+"/absent/cache"), true},
		{"a file as directory", "[cache]\npath = " + quote(file+"/cache"), true},
		{"existing directory", "[cache]\npath = " + quote(dir+"/cache"), false},
		{"cache off", "[cache]\nenabled = false\npath = " + quote(dir+"/absent/cache"), false},
		{"no path", "[cache]\npath = \"\"", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := mustParse(t, tt.src+okUpstream).Warnings()
			if !tt.warn {
				if len(ws) != 0 {
					t.Errorf("warnings %v, want none", ws)
				}
				return
			}
			if len(ws) != 1 || ws[0].Path != "cache.path" || !strings.HasPrefix(ws[0].String(), "config: cache.path: warning: ") {
				t.Errorf("warnings %q, want one line starting config: cache.path: warning:", ws)
			}
		})
	}
}
