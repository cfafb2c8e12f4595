package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadDefault(t *testing.T) {
	t.Parallel()
	cfg, err := LoadDefault()
	if err != nil {
		t.Fatalf("embedded default does not validate:\n%v", err)
	}
	want := Default()
	want.Upstreams = []Upstream{
		{Name: "quad9", Address: "tls://dns.quad9.net:853", IP: "9.9.9.9", Slots: DefaultSlots, Enabled: ptr(true),
			Addr: mustAddr(t, "tls://dns.quad9.net:853"), DialIP: netip.MustParseAddr("9.9.9.9")},
		{Name: "cloudflare", Address: "tls://one.one.one.one:853", IP: "1.1.1.1", Slots: DefaultSlots, Enabled: ptr(true),
			Addr: mustAddr(t, "tls://one.one.one.one:853"), DialIP: netip.MustParseAddr("1.1.1.1")},
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("LoadDefault() =\n%+v\nwant\n%+v", *cfg, want)
	}
}

// The default file documents every key of every table (active, or
// commented out for forward_zones, local_records, ip and ca_file), and the
// values it writes are the defaults: a file with only its upstreams
// decodes to the same configuration.
func TestDefaultTOMLDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	src := string(DefaultTOML)
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Server](), reflect.TypeFor[UpstreamPolicy](), reflect.TypeFor[Upstream](),
		reflect.TypeFor[ForwardZone](), reflect.TypeFor[LocalRecord](), reflect.TypeFor[QueryLog](),
		reflect.TypeFor[Admin](), reflect.TypeFor[AdminToken](), reflect.TypeFor[Log](), reflect.TypeFor[Clients](), reflect.TypeFor[StaticClient](),
		reflect.TypeFor[Blocking](), reflect.TypeFor[BlockingList](), reflect.TypeFor[BlockingGroup](),
		reflect.TypeFor[History](),
	} {
		for f := range typ.Fields() {
			key := f.Tag.Get("toml")
			if key == "-" {
				continue // a parsed value, not a key
			}
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
				// A nested array of tables, shown as its [[TABLE.KEY]]
				// section; its keys are checked by their own type.
				if !strings.Contains(src, "."+key+"]]") {
					t.Errorf("default.toml does not show %s's [[….%s]]", typ.Name(), key)
				}
				continue
			}
			if !strings.Contains(src, "\n"+key+" = ") && !strings.Contains(src, "\n# "+key+" = ") {
				t.Errorf("default.toml does not show %s key %q", typ.Name(), key)
			}
		}
	}
	minimal := "[[upstreams]]\nname = \"quad9\"\naddress = \"tls://dns.quad9.net:853\"\nip = \"9.9.9.9\"\n" +
		"[[upstreams]]\nname = \"cloudflare\"\naddress = \"tls://one.one.one.one:853\"\nip = \"1.1.1.1\"\n"
	got, def := mustParse(t, minimal), mustParse(t, src)
	for i := range def.Upstreams {
		def.Upstreams[i].Enabled = nil // written as true in the file, absent here
	}
	if !reflect.DeepEqual(got, def) {
		t.Errorf("default.toml values differ from the defaults:\n%+v\nvs\n%+v", def, got)
	}
}

func TestAbsentKeysGetDefaults(t *testing.T) {
	t.Parallel()
	got := mustParse(t, "[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n"+
		"[[local_records]]\nname = \"a.lan.\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n")
	want := Default()
	want.Upstreams = []Upstream{{Name: "udp://9.9.9.9:53", Address: "udp://9.9.9.9:53", Slots: DefaultSlots,
		Addr: mustAddr(t, "udp://9.9.9.9:53")}}
	want.LocalRecords = []LocalRecord{{Name: "a.lan.", Type: "A", Value: "192.0.2.1", TTL: DefaultTTL}}
	if !reflect.DeepEqual(withoutRRs(*got), want) {
		t.Errorf("got\n%+v\nwant\n%+v", *got, want)
	}
	checkRRs(t, got.LocalRecords, "a.lan.\t300\tIN\tA\t192.0.2.1")
	if !got.Upstreams[0].IsEnabled() {
		t.Error("an upstream without the enabled key is not enabled")
	}
}

// Every key set to something other than its default, including values a
// careless "zero means absent" merge would lose: "", 0, false, [].
func TestPresentKeysKeepValues(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	got := mustParse(t, `
[server]
listen = ["0.0.0.0:53", "[::]:53"]
tcp_idle_timeout_ms = 3000
max_tcp_connections = 10
max_concurrent_queries = 20
allow = ["192.0.2.0/24", "2001:db8::7/128"]
rebind_protection = false
rebind_allow = ["Plex.Direct"]
[upstream]
attempt_timeout_ms = 100
total_timeout_ms = 100
read_timeout_ms = 50
failure_threshold = 1
backoff_ms = 10
backoff_max_ms = 10
probe_timeout_ms = 20
[[upstreams]]
name = "primary"
address = "tls://dns.example:853"
ip = "192.0.2.53"
slots = 1
ca_file = `+quote(ca)+`
enabled = false
[[upstreams]]
address = "udp://192.0.2.1:53"
slots = 4096
enabled = true
[[forward_zones]]
zone = "home.arpa."
resolver = "192.0.2.2:5353"
[[local_records]]
name = "x.home.arpa."
type = "TXT"
value = "hello"
ttl = 0
[cache]
enabled = false
size_mib = 0
min_ttl_s = 7
max_ttl_s = 70
negative_max_ttl_s = 0
failure_ttl_s = 0
prefetch = false
serve_stale = false
stale_max_age_s = 0
stale_answer_ttl_s = 0
stale_client_timeout_ms = 1
path = ""
[query_log]
path = "/var/log/nxdnsd.jsonl"
attempts = true
[history]
enabled = false
path = "/var/lib/nxdnsd/history.db"
retention_days = 2
max_mib = 64
[admin]
listen = ""
recent_queries = 50
[log]
level = "error"
[clients]
hosts_files = ["/etc/hosts"]
leases_files = ["/var/lib/misc/dnsmasq.leases"]
reverse_lookup = false
[[clients.static]]
name = "tablet"
addresses = ["192.0.2.50", "2001:db8::50"]
`)
	want := Config{
		Server: Server{Listen: []string{"0.0.0.0:53", "[::]:53"}, TCPIdleTimeoutMS: 3000, MaxTCPConnections: 10, MaxConcurrentQueries: 20, Allow: []string{"192.0.2.0/24", "2001:db8::7/128"},
			RebindAllow: []string{"Plex.Direct"}},
		Upstream: UpstreamPolicy{AttemptTimeoutMS: 100, TotalTimeoutMS: 100, ReadTimeoutMS: 50, FailureThreshold: 1, BackoffMS: 10, BackoffMaxMS: 10, ProbeTimeoutMS: 20},
		Upstreams: []Upstream{
			{Name: "primary", Address: "tls://dns.example:853", IP: "192.0.2.53", Slots: 1, CAFile: ca, Enabled: ptr(false)},
			{Name: "udp://192.0.2.1:53", Address: "udp://192.0.2.1:53", Slots: 4096, Enabled: ptr(true)},
		},
		ForwardZones: []ForwardZone{{Zone: "home.arpa.", Resolver: "192.0.2.2:5353"}},
		LocalRecords: []LocalRecord{{Name: "x.home.arpa.", Type: "TXT", Value: "hello", TTL: 0}},
		Cache:        Cache{MinTTLS: 7, MaxTTLS: 70, StaleClientTimeoutMS: 1},
		QueryLog:     QueryLog{Path: "/var/log/nxdnsd.jsonl", Attempts: true},
		History:      History{Path: "/var/lib/nxdnsd/history.db", RetentionDays: 2, MaxMiB: 64},
		Admin:        Admin{Listen: "", RecentQueries: 50},
		Log:          Log{Level: "error"},
		Clients: Clients{HostsFiles: []string{"/etc/hosts"}, LeasesFiles: []string{"/var/lib/misc/dnsmasq.leases"},
			Static: []StaticClient{{Name: "tablet", Addresses: []string{"192.0.2.50", "2001:db8::50"}}}},
		Blocking: defaultBlocking(), // its keys: TestBlockingKeysKeepValues
	}
	if !reflect.DeepEqual(withoutParsed(*got), want) {
		t.Errorf("got\n%+v\nwant\n%+v", *got, want)
	}
	u := got.Upstreams
	if u[0].Addr != mustAddr(t, "tls://dns.example:853") || u[0].DialIP != netip.MustParseAddr("192.0.2.53") || !u[0].RootCAs.Equal(mustLoadCA(t, ca)) {
		t.Errorf("upstreams[0] parsed as %v, ip %v, roots %v; want the address, the ip and the CA file's pool", u[0].Addr, u[0].DialIP, u[0].RootCAs)
	}
	if u[1].Addr != mustAddr(t, "udp://192.0.2.1:53") || u[1].DialIP.IsValid() || u[1].RootCAs != nil {
		t.Errorf("upstreams[1] parsed as %v, ip %v, roots %v; want the address, no ip, the system roots", u[1].Addr, u[1].DialIP, u[1].RootCAs)
	}
	checkRRs(t, got.LocalRecords, "x.home.arpa.\t0\tIN\tTXT\t\"hello\"")
}

// Per-element defaults come from each element's own keys, not from
// whether some other element set the key.
func TestElementDefaultsAreIndependent(t *testing.T) {
	t.Parallel()
	got := mustParse(t, `
[[upstreams]]
name = "one"
address = "udp://192.0.2.1:53"
slots = 7
[[upstreams]]
address = "udp://192.0.2.2:53"
[[local_records]]
name = "a.lan"
type = "A"
value = "192.0.2.10"
ttl = 0
[[local_records]]
name = "b.lan"
type = "A"
value = "192.0.2.11"
`)
	if u := got.Upstreams[1]; u.Slots != DefaultSlots || u.Name != u.Address {
		t.Errorf("second upstream = %+v, want slots %d and the address as name", u, DefaultSlots)
	}
	if got.Upstreams[0].Slots != 7 || got.Upstreams[0].Name != "one" {
		t.Errorf("first upstream = %+v, want its own slots and name", got.Upstreams[0])
	}
	if got.LocalRecords[0].TTL != 0 || got.LocalRecords[1].TTL != DefaultTTL {
		t.Errorf("ttls = %d, %d; want 0 (present) and %d (absent)", got.LocalRecords[0].TTL, got.LocalRecords[1].TTL, DefaultTTL)
	}
}

func TestLoadValidFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testdata, "valid.toml")
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s):\n%v", path, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a loaded, normalised configuration does not validate again:\n%v", err)
	}
	if got, want := cfg.Upstreams[1].CAFile, filepath.Join(testdata, "ca.pem"); got != want {
		t.Errorf("ca_file = %q, want %q (relative to the file's directory)", got, want)
	}
	want := []ForwardZone{{Zone: "lan.", Resolver: "192.168.1.1:53"}, {Zone: "168.192.in-addr.arpa.", Resolver: "192.168.1.1:53"}}
	if !reflect.DeepEqual(cfg.ForwardZones, want) {
		t.Errorf("forward zones = %+v, want %+v", cfg.ForwardZones, want)
	}
	wantRecords := []LocalRecord{
		{Name: "nas.lan.", Type: "A", Value: "192.168.1.10", TTL: 600},
		{Name: "nas.lan.", Type: "AAAA", Value: "fd00::10", TTL: DefaultTTL},
		{Name: "files.lan.", Type: "CNAME", Value: "nas.lan.", TTL: DefaultTTL},
		{Name: "10.1.168.192.in-addr.arpa.", Type: "PTR", Value: "nas.lan.", TTL: 0},
		{Name: "nas.lan.", Type: "TXT", Value: "v=nas; owner=home", TTL: DefaultTTL},
	}
	if got := withoutRRs(*cfg).LocalRecords; !reflect.DeepEqual(got, wantRecords) {
		t.Errorf("local records = %+v, want %+v", got, wantRecords)
	}
	checkRRs(t, cfg.LocalRecords,
		"nas.lan.\t600\tIN\tA\t192.168.1.10",
		"nas.lan.\t300\tIN\tAAAA\tfd00::10",
		"files.lan.\t300\tIN\tCNAME\tnas.lan.",
		"10.1.168.192.in-addr.arpa.\t0\tIN\tPTR\tnas.lan.",
		"nas.lan.\t300\tIN\tTXT\t\"v=nas; owner=home\"")
	if u := cfg.Upstreams[2]; u.Name != "https://dns.google/dns-query" {
		t.Errorf("unnamed upstream's name = %q, want its address", u.Name)
	}
	if cfg.Upstreams[3].IsEnabled() {
		t.Error("upstream with enabled = false is enabled")
	}
	if cfg.Admin.Listen != "" || cfg.Server.TCPIdleTimeoutMS != 10000 || cfg.Upstream.TotalTimeoutMS != 4000 {
		t.Errorf("admin.listen = %q, tcp_idle_timeout_ms = %d, total_timeout_ms = %d; want \"\", 10000, 4000",
			cfg.Admin.Listen, cfg.Server.TCPIdleTimeoutMS, cfg.Upstream.TotalTimeoutMS)
	}
}

func TestLoadInvalidFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string
	}{
		{"invalid-many.toml", []string{
			"server.listen[0]", "server.max_tcp_connections",
			"upstream.total_timeout_ms", "upstream.backoff_max_ms",
			"upstreams[0].address", "upstreams[1].name", "upstreams[1].slots",
			"forward_zones[0].resolver", "forward_zones[1].zone",
			"local_records[0].type", "local_records[1].value", "local_records[1].ttl",
			"log.level",
		}},
		{"invalid-unknown-keys.toml", []string{
			"verbose", "server.listn", "upstreams[1].adress", "logging",
			"upstreams[1].address", // the typo left it without an address
		}},
		{"invalid-types.toml", []string{
			"server.listen", "server.tcp_idle_timeout_ms",
			"upstreams[0].slots", "upstreams[0].enabled", "query_log.attempts",
		}},
		{"invalid-syntax.toml", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load(filepath.Join(testdata, tt.file))
			assertPaths(t, pathsOf(t, cfg, err), tt.want, err)
		})
	}
}

func TestSyntaxErrorNamesLine(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(testdata, "invalid-syntax.toml"))
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Message, "line 3: ") {
		t.Fatalf("problems = %+v, want one at line 3", ps)
	}
	if !strings.HasPrefix(err.Error(), "config: line 3: ") {
		t.Errorf("Error() = %q, want the -check line for line 3", err.Error())
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "absent.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(absent) = %v, want an error wrapping fs.ErrNotExist", err)
	}
	var ps Problems
	if errors.As(err, &ps) {
		t.Errorf("an unreadable file is reported as content problems: %v", ps)
	}
}

func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"top level", "verbose = true" + okUpstream, []string{"verbose"}},
		{"in a table", "[server]\nlistn = []" + okUpstream, []string{"server.listn"}},
		{"whole unknown table reported once", "[logging]\nlevel = \"debug\"\nfile = \"x\"" + okUpstream, []string{"logging"}},
		{"unknown sub-table", "[upstream.retry]\ncount = 2" + okUpstream, []string{"upstream.retry"}},
		{"dotted key in a table", "[server]\nlimits.max = 3" + okUpstream, []string{"server.limits"}},
		{"quoted key", "\"foo bar\" = 1" + okUpstream, []string{`"foo bar"`}},
		{"case differs", "[server]\nListen = [\"127.0.0.1:53\"]" + okUpstream, []string{"server.Listen"}},
		{"array of tables element", okUpstream + "[[upstreams]]\naddress = \"udp://1.1.1.1:53\"\nslot = 2\n",
			[]string{"upstreams[1].slot"}},
		{"inline array of tables", `upstreams = [{address = "udp://9.9.9.9:53"}, {address = "udp://1.1.1.1:53", naem = "x"}]`,
			[]string{"upstreams[1].naem"}},
		{"sub-table of an element", okUpstream + "[upstreams.tls]\nverify = false\n", []string{"upstreams[0].tls"}},
		{"keys that name no field", okUpstream + "\"-\" = 1\n\"\" = 2\n[[local_records]]\nname = \"a.lan\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\n\"-\" = 3\n",
			[]string{"upstreams[0].-", `upstreams[0].""`, "local_records[0].-"}},
		{"several, in file order", "[[local_records]]\nname = \"a.lan\"\ntype = \"A\"\nvalue = \"192.0.2.1\"\nttl_s = 1\n" +
			"[[local_records]]\nname = \"b.lan\"\ntype = \"A\"\nvalue = \"192.0.2.2\"\nkind = \"A\"\n" + okUpstream + "zzz = 1\n",
			[]string{"local_records[0].ttl_s", "local_records[1].kind", "upstreams[0].zzz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.src))
			assertPaths(t, pathsOf(t, cfg, err), tt.want, err)
		})
	}
}

func TestUnknownKeyMessages(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("[server]\nListen = [\"127.0.0.1:53\"]\nlistn = 1" + okUpstream))
	got := err.Error()
	want := "config: server.Listen: unknown key (keys are case-sensitive: did you mean \"listen\"?)\n" +
		"config: server.listn: unknown key"
	if got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
}

func TestTypeMismatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
		message   string // of the first problem
	}{
		{"string for integer", "[upstream]\nbackoff_ms = \"1s\"" + okUpstream,
			[]string{"upstream.backoff_ms"}, "expected an integer, found a string"},
		{"integer for table", "server = 5" + okUpstream, []string{"server"}, "expected a table, found an integer"},
		{"array element", "[server]\nlisten = [\"127.0.0.1:53\", 53]" + okUpstream,
			[]string{"server.listen[1]"}, "expected a string, found an integer"},
		{"table for array of tables", "[upstreams]\naddress = \"udp://9.9.9.9:53\"",
			[]string{"upstreams"}, "expected an array of tables, found a table"},
		{"scalar in array of tables", "upstreams = [5]", []string{"upstreams[0]"}, "expected a table, found an integer"},
		{"date for string", "[log]\nlevel = 2026-01-02" + okUpstream, []string{"log.level"}, "expected a string, found a date-time"},
		{"float for integer", "[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\nslots = 1.5",
			[]string{"upstreams[0].slots"}, "expected an integer, found a float"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.src))
			assertPaths(t, pathsOf(t, cfg, err), tt.want, err)
			if err != nil && problemsOf(t, err)[0].Message != tt.message {
				t.Errorf("message = %q, want %q", problemsOf(t, err)[0].Message, tt.message)
			}
		})
	}
}

func TestDurations(t *testing.T) {
	t.Parallel()
	d := Default()
	for _, tt := range []struct {
		name      string
		got, want time.Duration
	}{
		{"AttemptTimeout", d.Upstream.AttemptTimeout(), 2500 * time.Millisecond},
		{"TotalTimeout", d.Upstream.TotalTimeout(), 5 * time.Second},
		{"ReadTimeout", d.Upstream.ReadTimeout(), 2 * time.Second},
		{"Backoff", d.Upstream.Backoff(), time.Second},
		{"BackoffMax", d.Upstream.BackoffMax(), 30 * time.Second},
		{"ProbeTimeout", d.Upstream.ProbeTimeout(), time.Second},
		{"TCPIdleTimeout", d.Server.TCPIdleTimeout(), 10 * time.Second},
	} {
		if tt.got != tt.want {
			t.Errorf("%s() = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// quote renders s as a TOML basic string, escaping the two characters the
// test values can contain that a basic string cannot hold as they are.
func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}
