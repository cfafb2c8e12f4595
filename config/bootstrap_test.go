package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// upstream.bootstrap entries are IP:PORT (an IP alone is port 53), each
// bad one named by its index, and none is nxdnsd's own listener.
func TestBootstrapEntries(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, list string
		want       []string
	}{
		{"valid", `["192.0.2.53:53", "[2001:db8::53]:5353", "192.0.2.54"]`, nil},
		{"empty", `[]`, nil},
		{"bad second", `["192.0.2.53:53", "dns.example:53"]`, []string{"upstream.bootstrap[1]"}},
		{"bad several", `["192.0.2.53:0", "192.0.2.53:53", "2001:db8::53", "not an address"]`,
			[]string{"upstream.bootstrap[0]", "upstream.bootstrap[2]", "upstream.bootstrap[3]"}},
		{"own listener", `["127.0.0.1:1053"]`, []string{"upstream.bootstrap[0]"}},
		{"not an array", `"192.0.2.53:53"`, []string{"upstream.bootstrap"}},
	} {
		cfg, err := Parse([]byte("[upstream]\nbootstrap = " + c.list + okUpstream))
		if got := pathsOf(t, cfg, err); !slices.Equal(got, c.want) {
			t.Errorf("%s: problem paths = %q, want %q\n%v", c.name, got, c.want, err)
		}
	}
}

// Validation parses the entries once, for the daemon; "bootstrap = []" is
// the absent key.
func TestBootstrapParsed(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "[upstream]\nbootstrap = [\"192.0.2.53:5353\", \"[2001:db8::53]\", \"192.0.2.54\"]"+okUpstream)
	want := []netip.AddrPort{
		netip.MustParseAddrPort("192.0.2.53:5353"),
		netip.MustParseAddrPort("[2001:db8::53]:53"),
		netip.MustParseAddrPort("192.0.2.54:53"),
	}
	if got := cfg.Upstream.BootstrapAddrs; !slices.Equal(got, want) {
		t.Errorf("BootstrapAddrs = %v, want %v", got, want)
	}
	if cfg := mustParse(t, "[upstream]\nbootstrap = []"+okUpstream); cfg.Upstream.Bootstrap != nil || cfg.Upstream.BootstrapAddrs != nil {
		t.Errorf("bootstrap = [] parsed as %q, %v; want the absent key's nil", cfg.Upstream.Bootstrap, cfg.Upstream.BootstrapAddrs)
	}
}

// A tls or https upstream without ip whose host nothing can look up is
// valid, but -check and the daemon warn about it at its ip: nxdnsd never
// asks the system resolver, so it could never be used.
func TestWarningsNameUnresolvableUpstreams(t *testing.T) {
	t.Parallel()
	const (
		named   = "[[upstreams]]\naddress = \"tls://dns.example:853\"\n"
		doh     = "[[upstreams]]\naddress = \"https://doh.example/dns-query\"\n"
		pinned  = "[[upstreams]]\naddress = \"tls://dns.quad9.net:853\"\nip = \"9.9.9.9\"\n"
		literal = "[[upstreams]]\naddress = \"tls://9.9.9.9:853\"\n"
		udp     = "[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n"
		off     = "enabled = false\n"
	)
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"alone", named, []string{"upstreams[0].ip"}},
		{"two, nothing to ask", named + doh, []string{"upstreams[0].ip", "upstreams[1].ip"}},
		{"an upstream with ip", named + pinned, nil},
		{"an IP as host", doh + literal, nil},
		{"a udp upstream", udp + named, nil},
		{"the one with ip disabled", named + pinned + off, []string{"upstreams[0].ip"}},
		{"the unresolvable one disabled", named + off + pinned, nil},
		{"a bootstrap", "[upstream]\nbootstrap = [\"192.0.2.53:53\"]\n" + named + doh, nil},
	} {
		cfg := mustParse(t, c.src)
		var got []string
		for _, w := range cfg.Warnings() {
			got = append(got, w.Path)
			if !strings.Contains(w.Message, "warning:") || !strings.Contains(w.Message, "system resolver") {
				t.Errorf("%s: warning %q does not say what it is and why", c.name, w)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: warnings at %q, want %q", c.name, got, c.want)
		}
	}
	def, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	if ws := def.Warnings(); ws != nil {
		t.Errorf("the embedded default warns: %v", ws)
	}
}
