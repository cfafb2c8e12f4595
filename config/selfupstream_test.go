package config

import (
	"net/netip"
	"strings"
	"testing"
)

// An upstream that is one of nxdnsd's own listeners is refused at
// upstreams[i].address, whatever spelling reaches the listener; what
// reaches another socket passes.
func TestSelfUpstreamRefused(t *testing.T) {
	t.Parallel()
	conf := func(listen []string, upstreams ...string) string {
		var b strings.Builder
		b.WriteString("[server]\nlisten = [")
		for i, l := range listen {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(l))
		}
		b.WriteString("]\n")
		for _, u := range upstreams {
			b.WriteString("[[upstreams]]\naddress = " + quote(u) + "\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"the listener itself", conf([]string{"127.0.0.1:1053"}, "udp://127.0.0.1:1053"), []string{"upstreams[0].address"}},
		{"over tcp", conf([]string{"127.0.0.1:1053"}, "udp://9.9.9.9:53", "tcp://127.0.0.1:1053"), []string{"upstreams[1].address"}},
		{"the second listener", conf([]string{"192.0.2.1:53", "[::1]:5353"}, "udp://[::1]:5353"), []string{"upstreams[0].address"}},
		{"any loopback under 0.0.0.0", conf([]string{"0.0.0.0:53"}, "udp://127.0.0.53:53"), []string{"upstreams[0].address"}},
		{"::1 under [::]", conf([]string{"[::]:53"}, "tcp://[::1]:53"), []string{"upstreams[0].address"}},
		{"IPv4-mapped", conf([]string{"127.0.0.1:53"}, "udp://[::ffff:127.0.0.1]:53"), []string{"upstreams[0].address"}},
		{"the unspecified address", conf([]string{"127.0.0.1:53"}, "udp://0.0.0.0:53"), []string{"upstreams[0].address"}},
		{"every one reported", conf([]string{"127.0.0.1:53"}, "udp://127.0.0.1:53", "tcp://127.0.0.1:53"), []string{"upstreams[0].address", "upstreams[1].address"}},

		{"another port", conf([]string{"127.0.0.1:1053"}, "udp://127.0.0.1:53"), nil},
		{"another loopback address", conf([]string{"127.0.0.1:53"}, "udp://127.0.0.53:53"), nil},
		{"another family under a wildcard", conf([]string{"[::]:53"}, "udp://127.0.0.1:53"), nil},
		{"port 0", conf([]string{"127.0.0.1:0"}, "udp://127.0.0.1:53"), nil},
		{"disabled", conf([]string{"127.0.0.1:53"}, "udp://9.9.9.9:53") + "[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\nenabled = false\n", nil},
		{"tls is not a DNS listener", conf([]string{"127.0.0.1:853"}, "tls://127.0.0.1:853"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tc.src))
			assertPaths(t, pathsOf(t, cfg, err), tc.want, err)
		})
	}
}

// The message names the listener, so that the fix is plain.
func TestSelfUpstreamMessage(t *testing.T) {
	_, err := Parse([]byte("[server]\nlisten = [\"192.0.2.1:53\", \"0.0.0.0:1053\"]\n[[upstreams]]\naddress = \"udp://127.0.0.1:1053\"\n"))
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0].Message, `"udp://127.0.0.1:1053" is nxdnsd's own listener server.listen[1] ("0.0.0.0:1053")`) {
		t.Errorf("problems %v", ps)
	}
}

// A wildcard listener takes the host's own interface addresses too.
func TestReachesHostAddresses(t *testing.T) {
	local := func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("fd00::5")}
	}
	for _, tc := range []struct {
		ip, listener string
		want         bool
	}{
		{"192.168.1.5", "0.0.0.0", true},
		{"fd00::5", "::", true},
		{"192.168.1.6", "0.0.0.0", false},
		{"192.168.1.5", "192.168.1.5", true},
		{"192.168.1.5", "127.0.0.1", false},
		{"192.168.1.5", "::", false},
		{"::", "::1", true},
		{"::", "fd00::5", false},
	} {
		if got := reaches(netip.MustParseAddr(tc.ip), netip.MustParseAddr(tc.listener), local); got != tc.want {
			t.Errorf("%s to a listener on %s: %v, want %v", tc.ip, tc.listener, got, tc.want)
		}
	}
}
