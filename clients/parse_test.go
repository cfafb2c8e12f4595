package clients

import (
	"testing"
	"time"
)

func TestParseDnsmasqLeases(t *testing.T) {
	t.Parallel()
	p := parseLeases([]byte("1764612000 aa:bb:cc:dd:ee:ff 192.168.1.20 Tablet 01:aa:bb:cc:dd:ee:ff\n" +
		"0 aa:bb:cc:dd:ee:fe 192.168.1.21 * *\n" +
		"duid 00:01:00:01:2c:aa:bb:cc:00:11:22:33:44:55\n" +
		"1764612000 3344556 fd00::21 phone.lan. 00:01:00:01\n" +
		"-5 aa 192.168.1.22 neg *\n" +
		"x aa 192.168.1.23 nan *\n" +
		"1 aa 192.168.1.300 badaddr *\n" +
		"1 aa 192.168.1.24 bad/name *\n"))
	if p.bad != 4 || p.firstBad != 5 {
		t.Errorf("bad = %d from line %d, want 4 from 5", p.bad, p.firstBad)
	}
	if len(p.bindings) != 2 || p.bindings[0].name != "Tablet" || !p.bindings[0].expires.Equal(time.Unix(1764612000, 0)) ||
		p.bindings[1].name != "phone.lan" || p.bindings[1].addr != addr("fd00::21") {
		t.Errorf("bindings = %+v", p.bindings)
	}
}

func TestParseISCLeases(t *testing.T) {
	t.Parallel()
	data := `# The format of this file is documented in the dhcpd.leases(5) manual page.
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
  binding state active;
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
lease 192.168.1.33 {
  ends 2 2026/12/01 19:00:00;
  binding state active;
}
lease 192.168.1.34 {
  ends 2 2026/12/01 19:00:00;
`
	p := parseLeases([]byte(data))
	if p.bad != 2 {
		t.Errorf("bad = %d, want 2 (the bad address, the record cut off)", p.bad)
	}
	want := []binding{
		{addr: addr("192.168.1.30"), name: "printer", expires: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)},
		{addr: addr("192.168.1.31"), name: "new-name"},
	}
	if len(p.bindings) != len(want) {
		t.Fatalf("bindings = %+v", p.bindings)
	}
	for i, b := range p.bindings {
		if b.addr != want[i].addr || b.name != want[i].name || !b.expires.Equal(want[i].expires) {
			t.Errorf("binding %d = %+v, want %+v", i, b, want[i])
		}
	}
}

func TestParseHosts(t *testing.T) {
	t.Parallel()
	p := parseHosts([]byte("127.0.0.1 localhost\n::1 localhost ip6-localhost\n192.168.1.2\tnas\tnas.lan.\n" +
		"fe80::1%eth0 router\n300.1.1.1 x\n"))
	if p.bad != 1 || p.firstBad != 5 {
		t.Errorf("bad = %d at %d", p.bad, p.firstBad)
	}
	var got []string
	for _, b := range p.bindings {
		got = append(got, b.addr.String()+"="+b.name)
	}
	want := []string{"127.0.0.1=localhost", "::1=localhost", "::1=ip6-localhost", "192.168.1.2=nas", "192.168.1.2=nas.lan", "fe80::1=router"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %q, want %q", got, want)
			break
		}
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"tablet": true, "my-pc_1.lan.": true, "": false, ".": false, "a..b": false,
		"bad name": false, "ümlaut": false, string(make([]byte, 64)): false} {
		if got := validName(s); got != want {
			t.Errorf("validName(%q) = %v", s, got)
		}
	}
}

// A lease's end past the year 9999 is malformed (time.Unix wraps round
// past 2^63 - 2^35 seconds: such a lease had ended, long ago), and an ISC
// lease that ended in the year 1, the zero time, has ended: it is not
// "ends never".
func TestLeaseEnds(t *testing.T) {
	t.Parallel()
	p := parseLeases([]byte("9223372036854775807 aa 192.168.1.24 far *\n253402300800 aa 192.168.1.25 past-9999 *\n" +
		"253402300799 aa 192.168.1.26 last *\n"))
	if p.bad != 2 || len(p.bindings) != 1 || p.bindings[0].name != "last" {
		t.Errorf("dnsmasq: %d bad, bindings %+v", p.bad, p.bindings)
	}
	p = parseLeases([]byte("lease 192.168.1.30 {\n ends epoch 9223372036854775807;\n client-hostname \"far\";\n}\n" +
		"lease 192.168.1.31 {\n ends 1 0001/01/01 00:00:00;\n client-hostname \"year-one\";\n}\n"))
	if p.bad != 1 || len(p.bindings) != 1 || p.bindings[0].name != "year-one" || p.bindings[0].expires.IsZero() ||
		!p.bindings[0].expires.Before(time.Now()) {
		t.Errorf("ISC: %d bad, bindings %+v", p.bad, p.bindings)
	}
}
