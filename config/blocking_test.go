package config

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every [blocking] key present keeps its value, lists and groups included,
// and validation parses the addresses, prefixes and client names.
func TestBlockingKeysKeepValues(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, okUpstream+`
[blocking]
enabled = false
answer = "ip"
answer_ip = ["192.0.2.9", "2001:db8::9"]
answer_ttl_s = 60
cname_inspection = false
refresh_h = 6
max_list_mib = 8
state_dir = "/var/lib/nxdnsd/lists"
block = ["ads.example", "||tracker.example^"]
allow = ["@@||ok.example^", "fine.example"]
[[blocking.lists]]
name = "hosts"
source = "https://example.org/hosts.txt"
[[blocking.lists]]
name = "mine"
source = "/etc/nxdns/allow.txt"
kind = "allow"
enabled = false
[[blocking.groups]]
name = "kids"
clients = ["192.168.1.50", "192.168.1.64/26", "Tablet", "::ffff:10.0.0.1"]
lists = ["hosts", "mine"]
`)
	b := cfg.Blocking
	want := Blocking{
		Enabled: false, Answer: "ip", AnswerIP: []string{"192.0.2.9", "2001:db8::9"}, AnswerTTLS: 60,
		CNAMEInspection: false, RefreshH: 6, MaxListMiB: 8, StateDir: "/var/lib/nxdnsd/lists",
		Block: []string{"ads.example", "||tracker.example^"}, Allow: []string{"@@||ok.example^", "fine.example"},
		Lists: []BlockingList{
			{Name: "hosts", Source: "https://example.org/hosts.txt", Kind: "block"},
			{Name: "mine", Source: "/etc/nxdns/allow.txt", Kind: "allow", Enabled: ptr(false)},
		},
		Groups: []BlockingGroup{{Name: "kids", Clients: []string{"192.168.1.50", "192.168.1.64/26", "Tablet", "::ffff:10.0.0.1"}, Lists: []string{"hosts", "mine"}}},
	}
	got := b
	got.AnswerAddrs = nil
	got.Groups = slices.Clone(got.Groups)
	got.Groups[0].Prefixes, got.Groups[0].Names = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	if !b.Lists[0].IsEnabled() || b.Lists[1].IsEnabled() || !b.Lists[0].IsURL() || b.Lists[1].IsURL() {
		t.Errorf("lists enabled/url = %v %v %v %v", b.Lists[0].IsEnabled(), b.Lists[1].IsEnabled(), b.Lists[0].IsURL(), b.Lists[1].IsURL())
	}
	wantAddrs := []netip.Addr{netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("2001:db8::9")}
	if !slices.Equal(b.AnswerAddrs, wantAddrs) {
		t.Errorf("AnswerAddrs = %v, want %v", b.AnswerAddrs, wantAddrs)
	}
	wantPrefixes := []netip.Prefix{netip.MustParsePrefix("192.168.1.50/32"), netip.MustParsePrefix("192.168.1.64/26"), netip.MustParsePrefix("10.0.0.1/32")}
	if g := b.Groups[0]; !slices.Equal(g.Prefixes, wantPrefixes) || !slices.Equal(g.Names, []string{"tablet"}) {
		t.Errorf("group parsed as %v %v, want %v [tablet]", g.Prefixes, g.Names, wantPrefixes)
	}
}

// Spec section 11's validation list, every problem named by its TOML
// path in one report.
func TestBlockingProblems(t *testing.T) {
	t.Parallel()
	src := okUpstream + `
[blocking]
answer = "ip"
answer_ip = ["not-an-ip", "192.0.2.1", "192.0.2.2"]
answer_ttl_s = -1
refresh_h = 0
max_list_mib = 0
block = ["ads.example", "||x^$third-party", "0.0.0.0 a.example b.example"]
allow = ["/(/"]
[[blocking.lists]]
name = "a"
source = "https://example.org/a.txt"
[[blocking.lists]]
name = "a"
source = "ftp://example.org/a.txt"
kind = "deny"
[[blocking.lists]]
name = "rule"
source = "https:///nohost"
[[blocking.lists]]
source = ""
[[blocking.groups]]
name = "kids"
clients = ["192.168.1.0/33", "bad name", "10.0.0.1"]
lists = ["a", "nope"]
[[blocking.groups]]
name = "kids"
[[blocking.groups]]
name = "default"
clients = ["10.0.0.2"]
`
	_, err := Parse([]byte(src))
	got := pathsOf(t, nil, err)
	want := []string{
		"blocking.answer_ip[0]", "blocking.answer_ip[2]",
		"blocking.answer_ttl_s", "blocking.refresh_h", "blocking.max_list_mib",
		"blocking.block[1]", "blocking.block[2]", "blocking.allow[0]",
		"blocking.lists[1].name", "blocking.lists[1].source", "blocking.lists[1].kind",
		"blocking.lists[2].name", "blocking.lists[2].source",
		"blocking.lists[3].name", "blocking.lists[3].source",
		"blocking.groups[0].clients[0]", "blocking.groups[0].clients[1]", "blocking.groups[0].lists[1]",
		"blocking.groups[1].name", "blocking.groups[2].clients",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems at\n%q\nwant\n%q\n%v", got, want, err)
	}
	if !strings.Contains(err.Error(), `config: blocking.lists[2].name: "rule" is reserved`) {
		t.Errorf("the reserved name is not explained:\n%v", err)
	}
	_, err = Parse([]byte(okUpstream + "[blocking]\nanswer = \"ip\"\n"))
	if got := pathsOf(t, nil, err); !slices.Equal(got, []string{"blocking.answer_ip"}) {
		t.Errorf(`answer = "ip" without answer_ip: problems at %q`, got)
	}
	_, err = Parse([]byte(okUpstream + "[blocking]\nanswer = \"sinkhole\"\n"))
	if got := pathsOf(t, nil, err); !slices.Equal(got, []string{"blocking.answer"}) {
		t.Errorf(`answer = "sinkhole": problems at %q`, got)
	}
	_, err = Parse([]byte(okUpstream + "[[blocking.lists]]\nname = \"x\"\nsource = \"/l\"\nsorce = \"typo\"\n"))
	if got := pathsOf(t, nil, err); !slices.Equal(got, []string{"blocking.lists[0].sorce"}) {
		t.Errorf(`a stray key: problems at %q`, got)
	}
}

// A refused list source never shows its user info or query, which often
// hold a token.
func TestBlockingSourceSecretsStayHidden(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"https://user:s3cret@/x?token=s3cret", "ftp://user:s3cret@example.org/l?key=s3cret"} {
		_, err := Parse([]byte(okUpstream + "[[blocking.lists]]\nname = \"l\"\nsource = \"" + src + "\"\n"))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", src, err)
		}
	}
}
