package clients

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of the file parsers: hosts files (parseHosts) and DHCP
// lease files, dnsmasq's and ISC dhcpd's (parseLeases). Every binding they
// give must be one a lookup can use — a valid name without its final dot,
// an address canonical as lookups are (IPv4 unmapped, no zone) — the
// malformed lines counted must be lines of the file, the first of them
// where one is, and the bindings, written back in the file's format,
// must parse as themselves: nothing is made up or lost on the way.

func FuzzParseHosts(f *testing.F) {
	f.Add([]byte("127.0.0.1 localhost\n::1 localhost ip6-localhost\n192.168.1.2\tnas\tnas.lan.\n" +
		"fe80::1%eth0 router\n300.1.1.1 x\n"))
	f.Add([]byte("::ffff:192.168.1.3 mapped # a comment\n\n   # only a comment\n192.168.1.4\n"))
	f.Add([]byte("192.168.1.5 good bad/name\r\n192.168.1.6 crlf\r\n10.0.0.1 " + strings.Repeat("a", 64) + "\n"))
	f.Add([]byte("192.168.1.7 x.\x00y\n192.168.1.8 ümlaut\n192.168.1.9 a..b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := parseHosts(data)
		checkParsed(t, data, p)
		var back bytes.Buffer
		for _, b := range p.bindings {
			fmt.Fprintf(&back, "%s %s\n", b.addr, b.name)
		}
		sameBindings(t, p.bindings, parseHosts(back.Bytes()))
	})
}

func FuzzParseLeases(f *testing.F) {
	f.Add([]byte("1764612000 aa:bb:cc:dd:ee:ff 192.168.1.20 Tablet 01:aa:bb:cc:dd:ee:ff\n" +
		"0 aa:bb:cc:dd:ee:fe 192.168.1.21 * *\n" +
		"duid 00:01:00:01:2c:aa:bb:cc:00:11:22:33:44:55\n" +
		"1764612000 3344556 fd00::21 phone.lan. 00:01:00:01\n" +
		"-5 aa 192.168.1.22 neg *\n" +
		"x aa 192.168.1.23 nan *\n" +
		"1 aa 192.168.1.300 badaddr *\n" +
		"9223372036854775807 aa 192.168.1.24 far *\n"))
	f.Add([]byte(`# dhcpd.leases(5)
authoring-byte-order little-endian;

lease 192.168.1.30 {
  starts 2 2026/12/01 17:00:00;
  ends 2 2026/12/01 19:00:00;
  binding state active;
  hardware ethernet aa:bb:cc:dd:ee:01;
  client-hostname "printer";
}
lease 192.168.1.31 {
  ends 2 2026/12/01 19:00:00;
  binding state active;
  client-hostname "old-name";
}
lease 192.168.1.31 {
  ends never;
  client-hostname "new-name";
}
lease 192.168.1.32 {
  ends epoch 1764615600;
  binding state free;
  client-hostname "released";
}
lease not-an-address {
  client-hostname "x";
}
lease ::ffff:192.168.1.35 {
  ends epoch 9223372036854775807;
  client-hostname "mapped.";
}
lease 192.168.1.34 {
  ends 2 2026/13/01 19:00:00;
`))
	f.Add([]byte("server-duid \"\\000\\001\";\n\nlease fd00::1 {\n  ends 0 1969/12/31 23:59:59;\n  client-hostname \"\";\n}\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := parseLeases(data)
		checkParsed(t, data, p)
		var back bytes.Buffer
		if isISC(data) {
			seen := make(map[netip.Addr]bool)
			for _, b := range p.bindings {
				if seen[b.addr] {
					t.Fatalf("two bindings of %v: a later lease replaces an earlier one", b.addr)
				}
				seen[b.addr] = true
				ends := "never"
				if !b.expires.IsZero() {
					ends = fmt.Sprintf("epoch %d", b.expires.Unix())
				}
				fmt.Fprintf(&back, "lease %s {\n  ends %s;\n  binding state active;\n  client-hostname %q;\n}\n", b.addr, ends, b.name)
			}
		} else {
			for _, b := range p.bindings {
				var exp int64
				if !b.expires.IsZero() {
					exp = b.expires.Unix()
				}
				fmt.Fprintf(&back, "%d aa:bb:cc:dd:ee:ff %s %s *\n", exp, b.addr, b.name)
			}
		}
		sameBindings(t, p.bindings, parseLeases(back.Bytes()))
	})
}

// checkParsed checks what a parser gave for data.
func checkParsed(t *testing.T, data []byte, p parsed) {
	t.Helper()
	n := bytes.Count(data, []byte("\n")) + 1
	if p.bad < 0 || p.bad > n || (p.bad == 0) != (p.firstBad == 0) || p.firstBad < 0 || p.firstBad > n {
		t.Fatalf("%d bad lines from line %d, of %d", p.bad, p.firstBad, n)
	}
	if len(p.bindings) > len(data)/2 {
		t.Fatalf("%d bindings from %d bytes", len(p.bindings), len(data))
	}
	for _, b := range p.bindings {
		if !validName(b.name) || strings.HasSuffix(b.name, ".") {
			t.Fatalf("binding name %q", b.name)
		}
		if !b.addr.IsValid() || b.addr.Is4In6() || b.addr.Zone() != "" {
			t.Fatalf("binding address %v for %q", b.addr, b.name)
		}
		if !b.expires.IsZero() && (b.expires.Before(time.Unix(0, 0)) || b.expires.Year() > 9999) {
			t.Fatalf("a lease of %q ends %v, before the epoch or after 9999", b.name, b.expires)
		}
	}
}

// sameBindings checks that again, parsed from want written back, holds
// want and nothing else.
func sameBindings(t *testing.T, want []binding, again parsed) {
	t.Helper()
	if again.bad != 0 || len(again.bindings) != len(want) {
		t.Fatalf("written back, %d bindings parse as %d (%d bad lines): %+v, then %+v", len(want), len(again.bindings), again.bad, want, again.bindings)
	}
	for i, b := range again.bindings {
		if b.addr != want[i].addr || b.name != want[i].name || !b.expires.Equal(want[i].expires) {
			t.Fatalf("binding %d written back parses as %+v, was %+v", i, b, want[i])
		}
	}
}
