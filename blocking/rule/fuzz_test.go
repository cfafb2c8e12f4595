package rule

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzParse parses arbitrary list lines, as a block and as an allow list.
// Every rule it emits must be one a list could have meant: a name that is
// a valid lower-case ASCII (A-label) name without its final dot, or a
// regular expression within MaxRegexpLen; as many rules as it reports;
// none for a comment; allow rules for an allow list. Each rule's Text,
// parsed again, gives the same rule back, and Parse allocates nothing
// but for a first word with a colon (2 at most).
func FuzzParse(f *testing.F) {
	for _, l := range []string{
		"", "# comment", "! adblock comment", "0.0.0.0 ads.example", "127.0.0.1\tADS.Example.",
		":: ads.example", "::1 a.example b.example # two", "192.0.2.1 a.example", "0.0.0.0 0.0.0.0",
		"fe80::1%eth0 local.example", "ads.example", "Ads.Example. # trailing", "_dmarc.example",
		"xn--bcher-kva.example", "bücher.example", "||ads.example^", "@@||ok.example^",
		"||ads.example^$third-party", "||ads.example/path^", "example.com##.banner", "[Adblock Plus 2.0]",
		"*.ads.example", "*.*.ads.example", "/^ad[0-9]+\\./", "//", "/(/", "a..example",
		strings.Repeat("a", 63) + ".example", strings.Repeat("a.", 126) + "b", "1.2.3.4.5",
		"0.0.0.0 " + strings.Repeat("n.example ", 17), "cafe.de # hex-looking", "  ||x.y^  ",
		"1.2.3 a.example", "01.2.3.4 a.example", "256.1.1.1 a.example", "1.2.3.4. a.example",
		"dead:beef a.example", "::ffff:1.2.3.4 a.example", "0.0.0.0\t\tb.example\t# c",
	} {
		f.Add([]byte(l), false)
	}
	f.Add([]byte("||ads.example^"), true)
	f.Add([]byte("0.0.0.0 a.example b.example"), true)

	f.Fuzz(func(t *testing.T, line []byte, allowList bool) {
		orig := bytes.Clone(line)
		var rules []Rule
		n, comment := Parse(bytes.Clone(line), allowList, func(r Rule) {
			r.Name, r.Source = bytes.Clone(r.Name), bytes.Clone(r.Source)
			rules = append(rules, r)
		})
		if n != len(rules) {
			t.Fatalf("Parse(%q) reports %d rules, emitted %d", orig, n, len(rules))
		}
		if comment && n > 0 {
			t.Fatalf("Parse(%q): a comment with %d rules", orig, n)
		}
		for _, r := range rules {
			checkRule(t, orig, allowList, r)
			// The rule's text is a line that means the rule.
			text := r.Text()
			again, ok := One(text, r.Allow && r.Kind != Suffix)
			if r.Kind == Regexp {
				// One also compiles: a Regexp that does not is
				// the caller's to refuse.
				if _, err := Compile(r.Source); err != nil {
					continue
				}
			}
			if !ok || !sameRule(again, r) {
				t.Fatalf("Parse(%q) gave %+v, whose text %q parses as %+v (%v)", orig, r, text, again, ok)
			}
		}
		// isAddr is netip's answer, for the words it lets through.
		first, _ := field(bytes.TrimSpace(line))
		if got, want := isAddr(first), addrChars(first) && validAddr(first); got != want {
			t.Fatalf("isAddr(%q) = %v, netip says %v", first, got, want)
		}
		// Only a first word with a colon, given to netip, allocates:
		// its string, and the error when it is not an address.
		limit := 0.0
		if bytes.IndexByte(first, ':') >= 0 {
			limit = 2
		}
		buf := bytes.Clone(line)
		if allocs := testing.AllocsPerRun(1, func() {
			copy(buf, line)
			Parse(buf, allowList, func(Rule) {})
		}); allocs > limit {
			t.Fatalf("Parse(%q) allocates %v times", orig, allocs)
		}
	})
}

func validAddr(s []byte) bool {
	_, err := netip.ParseAddr(string(s))
	return err == nil
}

// addrChars is isAddr's filter of the bytes an address is written with.
func addrChars(s []byte) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':' || c == '%') {
			return false
		}
	}
	return true
}

func sameRule(a, b Rule) bool {
	return a.Kind == b.Kind && a.Allow == b.Allow && bytes.Equal(a.Name, b.Name) && bytes.Equal(a.Source, b.Source)
}

// checkRule checks one rule r that Parse emitted for line.
func checkRule(t *testing.T, line []byte, allowList bool, r Rule) {
	t.Helper()
	if allowList && !r.Allow {
		t.Fatalf("Parse(%q) of an allow list gave a block rule %+v", line, r)
	}
	if r.Allow && !allowList && !(r.Kind == Suffix && bytes.HasPrefix(bytes.TrimSpace(line), []byte("@@"))) {
		t.Fatalf("Parse(%q) of a block list gave an allow rule %+v", line, r)
	}
	switch r.Kind {
	case Regexp:
		if len(r.Name) != 0 || len(r.Source) == 0 || len(r.Source) > MaxRegexpLen {
			t.Fatalf("Parse(%q): regexp rule %+v", line, r)
		}
		return
	case Exact, Suffix, Below:
	default:
		t.Fatalf("Parse(%q): rule of kind %d", line, r.Kind)
	}
	if len(r.Source) != 0 {
		t.Fatalf("Parse(%q): a %d rule with a source %q", line, r.Kind, r.Source)
	}
	name := string(r.Name)
	if name == "" || len(name) > MaxNameLen || strings.HasSuffix(name, ".") {
		t.Fatalf("Parse(%q): name %q", line, name)
	}
	allDigits := true
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > MaxLabelLen {
			t.Fatalf("Parse(%q): name %q has a label of %d bytes", line, name, len(label))
		}
		for _, c := range []byte(label) {
			switch {
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				allDigits = false
			case c >= '0' && c <= '9':
			default:
				t.Fatalf("Parse(%q): name %q holds %q", line, name, c)
			}
		}
	}
	if allDigits {
		t.Fatalf("Parse(%q): name %q is digits and dots", line, name)
	}
	if _, ok := dns.IsDomainName(name + "."); !ok {
		t.Fatalf("Parse(%q): %q is not a domain name", line, name)
	}
}
