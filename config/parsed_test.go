package config

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"os"
	"testing"

	"github.com/miekg/dns"
)

// Validation parses each value once and keeps the result beside it: the
// rest of nxdnsd takes these and parses nothing again.
func TestParsedUpstreams(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	roots := mustLoadCA(t, ca)
	cfg := mustParse(t, `
[[upstreams]]
address = "TLS://DNS.Example:853"
ip = "2001:DB8::53"
ca_file = `+quote(ca)+`
[[upstreams]]
address = "https://doh.example/dns-query"
[[upstreams]]
address = "tcp://[2620:FE::FE]:53"
`)
	// The pool is the file's as it was read: the file is not needed again.
	if err := os.Remove(ca); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr  string
		ip    netip.Addr
		roots *x509.CertPool
	}{
		{"tls://dns.example:853", netip.MustParseAddr("2001:db8::53"), roots},
		{"https://doh.example/dns-query", netip.Addr{}, nil},
		{"tcp://[2620:fe::fe]:53", netip.Addr{}, nil},
	}
	for i, tt := range tests {
		u := cfg.Upstreams[i]
		if u.Addr != mustAddr(t, tt.addr) || u.Addr.String() != tt.addr {
			t.Errorf("upstreams[%d].Addr = %v, want %s", i, u.Addr, tt.addr)
		}
		if u.DialIP != tt.ip {
			t.Errorf("upstreams[%d].DialIP = %v, want %v", i, u.DialIP, tt.ip)
		}
		if (u.RootCAs == nil) != (tt.roots == nil) || !u.RootCAs.Equal(tt.roots) {
			t.Errorf("upstreams[%d].RootCAs = %v, want %v", i, u.RootCAs, tt.roots)
		}
	}
}

// Every record type is built once, by validation, in the form the query
// path answers with: owner and targets lower-case and fully qualified, IPs
// canonical.
func TestParsedRecords(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, okUpstream+`
[[local_records]]
name = "Mixed.Case.lan"
type = "aaaa"
value = "2001:DB8:0:0::1"
ttl = 30
[[local_records]]
name = "www.lan"
type = "CNAME"
value = "NAS.lan"
ttl = 120
[[local_records]]
name = "10.1.168.192.in-addr.arpa"
type = "ptr"
value = "Nas.Lan."
[[local_records]]
name = "nas.lan."
type = "A"
value = "192.168.1.10"
ttl = 2147483647
`)
	checkRRs(t, cfg.LocalRecords,
		"mixed.case.lan.\t30\tIN\tAAAA\t2001:db8::1",
		"www.lan.\t120\tIN\tCNAME\tnas.lan.",
		"10.1.168.192.in-addr.arpa.\t300\tIN\tPTR\tnas.lan.",
		"nas.lan.\t2147483647\tIN\tA\t192.168.1.10")
	want := []LocalRecord{
		{Name: "mixed.case.lan.", Type: "AAAA", Value: "2001:db8::1", TTL: 30},
		{Name: "www.lan.", Type: "CNAME", Value: "nas.lan.", TTL: 120},
		{Name: "10.1.168.192.in-addr.arpa.", Type: "PTR", Value: "nas.lan.", TTL: DefaultTTL},
		{Name: "nas.lan.", Type: "A", Value: "192.168.1.10", TTL: MaxTTL},
	}
	for i, r := range withoutRRs(*cfg).LocalRecords {
		if r != want[i] {
			t.Errorf("local_records[%d] normalised to %+v, want %+v", i, r, want[i])
		}
	}
}

// A TXT value goes on the wire byte for byte, backslashes and quotes
// included: dns.TXT would read a lone backslash as an escape.
func TestParsedTXTPacksTheText(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`C:\dir "x"`, `\\`, `\065`, "plain", "a;b (c) @"} {
		cfg := mustParse(t, okUpstream+"[[local_records]]\nname = \"t.lan\"\ntype = \"TXT\"\nvalue = "+quote(text)+"\n")
		r := cfg.LocalRecords[0]
		if r.Value != text {
			t.Errorf("%q normalised to %q", text, r.Value)
		}
		buf := make([]byte, 1024)
		end, err := dns.PackRR(r.RR, buf, 0, nil, false)
		if err != nil {
			t.Fatalf("packing the TXT record of %q: %v", text, err)
		}
		// The RDATA is the record's last bytes: one length octet, the text.
		rdata := buf[end-len(text)-1 : end]
		if int(rdata[0]) != len(text) || !bytes.Equal(rdata[1:], []byte(text)) {
			t.Errorf("%q went on the wire as %q", text, rdata)
		}
	}
}

// Validate parses a configuration built in code the same way, and judges
// it afresh each time: a value changed or removed since leaves no stale
// parsed value behind.
func TestValidateSetsParsedValues(t *testing.T) {
	t.Parallel()
	cfg := Default()
	cfg.Upstreams = []Upstream{{Name: "q", Address: "tls://dns.quad9.net:853", IP: "9.9.9.9", Slots: 1}}
	cfg.LocalRecords = []LocalRecord{{Name: "a.lan", Type: "A", Value: "192.0.2.1", TTL: 60}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if u := cfg.Upstreams[0]; u.Addr != mustAddr(t, "tls://dns.quad9.net:853") || u.DialIP != netip.MustParseAddr("9.9.9.9") {
		t.Errorf("upstream parsed as %v, ip %v", u.Addr, u.DialIP)
	}
	checkRRs(t, cfg.LocalRecords, "a.lan.\t60\tIN\tA\t192.0.2.1")

	cfg.Upstreams[0].Address, cfg.Upstreams[0].IP = "udp://192.0.2.9:53", ""
	cfg.LocalRecords[0].Value = "192.0.2.2"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if u := cfg.Upstreams[0]; u.Addr != mustAddr(t, "udp://192.0.2.9:53") || u.DialIP.IsValid() {
		t.Errorf("after the change: upstream parsed as %v, ip %v; want the new address, no ip", u.Addr, u.DialIP)
	}
	checkRRs(t, cfg.LocalRecords, "a.lan.\t60\tIN\tA\t192.0.2.2")

	cfg.LocalRecords[0].Value = "not an address"
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted an A record of \"not an address\"")
	}
	if cfg.LocalRecords[0].RR != nil {
		t.Errorf("a record with a problem kept the record of its former value: %v", cfg.LocalRecords[0].RR)
	}
}
