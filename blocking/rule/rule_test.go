package rule

import (
	"strings"
	"testing"
)

// Every line format of spec section 11, and lines that are none of them.
func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line    string
		allow   bool // allow list
		want    []string
		comment bool
	}{
		{line: "", comment: true},
		{line: "   ", comment: true},
		{line: "# a comment", comment: true},
		{line: "! Adblock comment", comment: true},
		{line: "0.0.0.0 ads.example", want: []string{"ads.example"}},
		{line: "127.0.0.1\tADS.Example.", want: []string{"ads.example"}},
		{line: ":: ads.example", want: []string{"ads.example"}},
		{line: "::1 a.example b.example # two names", want: []string{"a.example", "b.example"}},
		{line: "192.0.2.1 a.example", want: []string{"a.example"}},
		{line: "0.0.0.0 0.0.0.0"},
		{line: "0.0.0.0"},
		{line: "0.0.0.0 good.example bad/name"},
		{line: "ads.example", want: []string{"ads.example"}},
		{line: "Ads.Example. # trailing", want: []string{"ads.example"}},
		{line: "_dmarc.example", want: []string{"_dmarc.example"}},
		{line: "xn--bcher-kva.example", want: []string{"xn--bcher-kva.example"}},
		{line: "bücher.example"}, // a U-label: never guessed at
		{line: "||ads.example^", want: []string{"||ads.example^"}},
		{line: "||ADS.example^", want: []string{"||ads.example^"}},
		{line: "@@||ok.example^", want: []string{"@@||ok.example^"}},
		{line: "||ads.example^$third-party"},
		{line: "||ads.example/path^"},
		{line: "||ads.example^|"},
		{line: "example.com##.banner"},
		{line: "[Adblock Plus 2.0]"},
		{line: "|ads.example^"},
		{line: "*.ads.example", want: []string{"*.ads.example"}},
		{line: "*.*.ads.example"},
		{line: "/^ad[0-9]+\\./", want: []string{"/^ad[0-9]+\\./"}},
		{line: "//"},
		{line: "/" + strings.Repeat("a", MaxRegexpLen+1) + "/"},
		{line: "a..example"},
		{line: strings.Repeat("a", 64) + ".example"},
		{line: strings.Repeat("a.", 127) + "example"},
		{line: "1.2.3.4.5"},
		{line: "ads.example", allow: true, want: []string{"allow ads.example"}},
		{line: "||ads.example^", allow: true, want: []string{"@@||ads.example^"}},
		{line: "*.ads.example", allow: true, want: []string{"allow *.ads.example"}},
	}
	for _, tt := range tests {
		var got []string
		n, comment := Parse([]byte(tt.line), tt.allow, func(r Rule) {
			s := r.Text()
			if r.Allow && r.Kind != Suffix {
				s = "allow " + s
			}
			got = append(got, s)
		})
		if n != len(got) || strings.Join(got, ",") != strings.Join(tt.want, ",") || comment != tt.comment {
			t.Errorf("Parse(%q) = %d %q comment=%v; want %q comment=%v", tt.line, n, got, comment, tt.want, tt.comment)
		}
	}
}

// Parsing a list line allocates nothing: a million-line list is parsed
// with the line buffer alone.
func TestParseAllocatesNothing(t *testing.T) {
	lines := [][]byte{[]byte("0.0.0.0 ads.example"), []byte("||Ads.example^"), []byte("plain.example"),
		[]byte("*.w.example"), []byte("/re/"), []byte("# c"), []byte("0.0.0.0 a.example b.example"),
		[]byte("cafe.de # hex letters"), []byte("1.2.3 not.an.address")}
	sink := 0
	allocs := testing.AllocsPerRun(100, func() {
		for _, l := range lines {
			n, _ := Parse(l, false, func(r Rule) { sink += len(r.Name) })
			sink += n
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times per run", allocs)
	}
}

func TestOne(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s  string
		ok bool
	}{
		{"ads.example", true}, {"||ads.example^", true}, {"@@||ok.example^", true}, {"/^ad/", true},
		{"/(/", false}, {"0.0.0.0 a.example b.example", false}, {"# no rule", false}, {"a b c", false},
	} {
		if _, ok := One(tt.s, false); ok != tt.ok {
			t.Errorf("One(%q) ok = %v, want %v", tt.s, ok, tt.ok)
		}
	}
}
