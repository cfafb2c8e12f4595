package dnstext

import (
	"testing"

	"github.com/miekg/dns"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		rcode int
		want  string
	}{
		{dns.RcodeSuccess, "NOERROR"},
		{dns.RcodeServerFailure, "SERVFAIL"},
		{dns.RcodeBadVers, "BADVERS"},
		{dns.RcodeBadCookie, "BADCOOKIE"},
		{3841, "RCODE3841"},
	} {
		if got := Rcode(tc.rcode); got != tc.want {
			t.Errorf("Rcode(%d) = %q, want %q", tc.rcode, got, tc.want)
		}
	}
	for _, tc := range []struct {
		qtype uint16
		want  string
	}{
		{dns.TypeA, "A"},
		{dns.TypeHTTPS, "HTTPS"},
		{65280, "TYPE65280"},
	} {
		if got := Type(tc.qtype); got != tc.want {
			t.Errorf("Type(%d) = %q, want %q", tc.qtype, got, tc.want)
		}
	}
	for _, tc := range []struct {
		class uint16
		want  string
	}{
		{dns.ClassINET, "IN"},
		{dns.ClassCHAOS, "CH"},
		{dns.ClassANY, "ANY"},
		{42, "CLASS42"},
	} {
		if got := Class(tc.class); got != tc.want {
			t.Errorf("Class(%d) = %q, want %q", tc.class, got, tc.want)
		}
	}
}

var sink string

func TestNamedCodesAllocateNothing(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		sink = Rcode(dns.RcodeNameError)
		sink = Type(dns.TypeAAAA)
		sink = Class(dns.ClassCHAOS)
	})
	if n != 0 {
		t.Errorf("%v allocations per lookup, want 0", n)
	}
}
