package config

import (
	"slices"
	"strings"
	"testing"
)

// A bcrypt hash of "pw" at cost 4, made once for these tests.
const testHash = "$2a$04$HuNdmHada77Cjgnk4msMkebl0Ec0a/Q6JQsWfV.Wexcl2AXMKn1A6"

// admin.password_hash and [[admin.tokens]] are checked, each problem at
// its path, and a hash's problem never shows what was written there (a
// password pasted where its hash belongs).
func TestAdminAuthRules(t *testing.T) {
	t.Parallel()
	token := func(name, hash, role string) string {
		s := "\n[[admin.tokens]]\n"
		if name != "-" {
			s += "name = " + quote(name) + "\n"
		}
		if hash != "-" {
			s += "hash = " + quote(hash) + "\n"
		}
		if role != "-" {
			s += "role = " + quote(role) + "\n"
		}
		return s
	}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"no password", "[admin]\npassword_hash = \"\"", nil},
		{"a password", "[admin]\npassword_hash = " + quote(testHash), nil},
		{"a password, not a hash", "[admin]\npassword_hash = \"hunter2secret\"", []string{"admin.password_hash"}},
		{"a hash cut short", "[admin]\npassword_hash = " + quote(testHash[:50]), []string{"admin.password_hash"}},
		{"two tokens", "[admin]\npassword_hash = " + quote(testHash) +
			token("grafana", testHash, "read") + token("ha", testHash, "admin"), nil},
		{"token problems", "[admin]\npassword_hash = " + quote(testHash) +
			token("grafana", testHash, "read") +
			token("grafana", "hunter2secret", "Admin") +
			token("-", "-", "-"),
			[]string{"admin.tokens[1].name", "admin.tokens[1].hash", "admin.tokens[1].role",
				"admin.tokens[2].name", "admin.tokens[2].hash", "admin.tokens[2].role"}},
		{"token unknown key", token("grafana", testHash, "read") + "scope = \"all\"\n", []string{"admin.tokens[0].scope"}},
		{"tokens inline", "[admin]\ntokens = [{name = \"a\", hash = " + quote(testHash) + ", role = \"nobody\"}]", []string{"admin.tokens[0].role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.src + okUpstream))
			var got []string
			if err != nil {
				for _, p := range err.(Problems) {
					got = append(got, p.Path)
					if strings.Contains(p.Message, "hunter2") {
						t.Errorf("%s: the message shows what was written: %s", p.Path, p.Message)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems at %q, want %q\n%v", got, tc.want, err)
			}
		})
	}
	cfg := mustParse(t, "[admin]\npassword_hash = "+quote(testHash)+token("grafana", testHash, "read")+okUpstream)
	if tok := cfg.Admin.Tokens[0].AuthToken(); tok.Name != "grafana" || tok.Hash != testHash || tok.Role != "read" {
		t.Errorf("AuthToken() = %+v", tok)
	}
}

// An admin.listen that is not loopback, without a password, is valid and
// warned about (it serves only /metrics, /livez and /readyz), as are
// tokens without a password; with a password, or on loopback, it is not.
func TestAdminAuthWarnings(t *testing.T) {
	t.Parallel()
	tok := "\n[[admin.tokens]]\nname = \"g\"\nhash = " + quote(testHash) + "\nrole = \"read\"\n"
	for _, tc := range []struct {
		name, src string
		want      []string // paths
	}{
		{"the default", "", nil},
		{"loopback", "[admin]\nlisten = \"[::1]:8053\"", nil},
		{"every address", "[admin]\nlisten = \"0.0.0.0:8053\"", []string{"admin.listen"}},
		{"a LAN address", "[admin]\nlisten = \"192.168.1.2:8053\"", []string{"admin.listen"}},
		{"every address with a password", "[admin]\nlisten = \"[::]:8053\"\npassword_hash = " + quote(testHash), nil},
		{"off", "[admin]\nlisten = \"\"", nil},
		{"tokens without a password", "[admin]\nlisten = \"0.0.0.0:8053\"" + tok, []string{"admin.listen", "admin.tokens"}},
		{"tokens with a password", "[admin]\npassword_hash = " + quote(testHash) + tok, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := mustParse(t, tc.src+okUpstream).Warnings()
			var got []string
			for _, w := range ws {
				got = append(got, w.Path)
				if !strings.HasPrefix(w.Message, "warning: ") {
					t.Errorf("%s", w)
				}
				if w.Path == "admin.listen" && !strings.Contains(w.Message, `"set admin.password_hash"`) {
					t.Errorf("%s: does not say what the API answers", w)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("warnings at %q, want %q: %v", got, tc.want, ws)
			}
		})
	}
}
