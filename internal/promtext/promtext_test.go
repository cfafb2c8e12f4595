package promtext

import "testing"

// The HELP and TYPE lines as the text format has them, and every
// character the format escapes in a label value escaped, the rest kept.
func TestAppendHelpAndEscape(t *testing.T) {
	t.Parallel()
	got := string(AppendHelp([]byte("x\n"), "nxdns_blocked_total", "Queries blocked.", "counter"))
	want := "x\n# HELP nxdns_blocked_total Queries blocked.\n# TYPE nxdns_blocked_total counter\n"
	if got != want {
		t.Errorf("AppendHelp: %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		"plain":         "plain",
		`a\b`:           `a\\b`,
		`say "hi"`:      `say \"hi\"`,
		"two\nlines":    `two\nlines`,
		"ünïcode, =,{}": "ünïcode, =,{}",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
