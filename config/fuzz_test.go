package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzParse feeds arbitrary bytes to Parse as a configuration file. Parse
// must never panic, and must return exactly one of a configuration that
// passes Validate, or Problems, each with a message on one line (nxdnsd
// -check prints one line per problem) and a well-formed TOML path: a path
// is empty only for the one problem of a syntax error. The same input gives
// the same answer twice: problems come in the file's order, not a map's.
//
// Its seed corpus is every file in ../testdata/config, the embedded
// default, the snippets below and testdata/fuzz/FuzzParse/ (Go's corpus
// format; `go test -fuzz` also writes findings there). A longer run is
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10m -parallel 1 ./config/
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(testdata, "*.toml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed configurations in %s: %v", testdata, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(DefaultTOML)
	for _, s := range []string{
		"",
		okUpstream,
		"[server]\nlisten = []\n",
		"[server]\nListen = [\"127.0.0.1:53\"]\n" + okUpstream,
		"\"odd key\" = 1\n[\"odd table\".x]\ny = 2\n" + okUpstream,
		"upstreams = [{address = \"udp://9.9.9.9:53\", slots = 99999}, 5, {adress = \"x\"}]\n",
		"[upstream]\nattempt_timeout_ms = 9223372036854775807\ntotal_timeout_ms = -1\n" + okUpstream,
		"[upstream]\nattempt_timeout_ms = 1.5\nfailure_threshold = \"3\"\n" + okUpstream,
		"[[upstreams]]\naddress = \"tls://dns.example:853\"\nca_file = \"missing.pem\"\nip = \"nope\"\n",
		"[[upstreams]]\naddress = \"https://dns.example/dns-query\"\nca_file = \"" + filepath.Join(testdata, "ca.pem") + "\"\n",
		"[[forward_zones]]\nzone = \"lan\"\nresolver = \"[fd00::1]\"\n" + okUpstream,
		"[[local_records]]\nname = \"a.lan\"\ntype = \"txt\"\nvalue = \"" + strings.Repeat("x", 300) + "\"\n" + okUpstream,
		"[[local_records]]\nname = \"a.lan\"\ntype = \"CNAME\"\nvalue = \"b.lan\"\n[[local_records]]\nname = \"a.lan\"\ntype = \"A\"\nvalue = \"10.0.0.1\"\n" + okUpstream,
		"[log]\nlevel = \"LOUD\"\n[admin]\nlisten = \"127.0.0.1:5353\"\n" + okUpstream,
		"server = 1\nupstream = []\nquery_log = {path = 1}\n",
		"[server\nlisten = 1",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		if !safeCAFiles(data) {
			t.Skip("names a ca_file that is no small regular file; Parse would read it")
		}
		cfg, err := Parse(data)
		checkParsed(t, cfg, err)

		cfg2, err2 := Parse(data)
		if (cfg == nil) != (cfg2 == nil) || errString(err) != errString(err2) {
			t.Fatalf("parsing twice gave different answers:\n%v\n---\n%v", err, err2)
		}
	})
}

// checkParsed fails t unless (cfg, err) is one of Parse's two answers.
func checkParsed(t *testing.T, cfg *Config, err error) {
	t.Helper()
	if err == nil {
		if cfg == nil {
			t.Fatal("nil configuration without an error")
		}
		// Validate takes the normalised form too.
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a configuration that Validate rejects:\n%v", err)
		}
		return
	}
	if cfg != nil {
		t.Fatalf("configuration returned along with %v", err)
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v (%T) is not Problems", err, err)
	}
	if len(ps) == 0 {
		t.Fatal("empty Problems returned as an error")
	}
	for _, p := range ps {
		if strings.TrimSpace(p.Message) == "" {
			t.Errorf("problem at %q has no message", p.Path)
		}
		if strings.ContainsAny(p.Message, "\r\n") {
			t.Errorf("problem at %q spans lines: %q", p.Path, p.Message)
		}
		if p.Path == "" {
			if len(ps) != 1 {
				t.Errorf("a problem without a path (%q) among %d", p.Message, len(ps))
			}
			continue
		}
		if !wellFormedPath(p.Path) {
			t.Errorf("malformed path %q (message %q)", p.Path, p.Message)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// wellFormedPath reports whether p is a TOML path as the contract writes
// them: keys joined by dots, each a bare key or, when it needs quoting, a
// quoted one, followed by zero-based array indexes ("upstreams[3].address",
// "server.\"odd key\"").
func wellFormedPath(p string) bool {
	for {
		switch {
		case p == "":
			return false
		case p[0] == '"':
			q, err := strconv.QuotedPrefix(p)
			if err != nil {
				return false
			}
			if k, _ := strconv.Unquote(q); bareKey.MatchString(k) {
				return false // quoted although it needs no quotes
			}
			p = p[len(q):]
		default:
			n := strings.IndexFunc(p, func(r rune) bool {
				return !(r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
			})
			if n == 0 {
				return false
			}
			if n < 0 {
				n = len(p)
			}
			p = p[n:]
		}
		for strings.HasPrefix(p, "[") {
			end := strings.IndexByte(p, ']')
			if end < 2 {
				return false
			}
			i := p[1:end]
			if _, err := strconv.ParseUint(i, 10, 31); err != nil || (len(i) > 1 && i[0] == '0') {
				return false
			}
			p = p[end+1:]
		}
		if p == "" {
			return true
		}
		if p[0] != '.' {
			return false
		}
		p = p[1:]
	}
}

// safeCAFiles reports whether every ca_file that data names (as far as a
// plain TOML decode can tell) is harmless for Parse to read: absent, or a
// regular file of at most 1 MiB outside /dev, /proc and /sys. A fuzzed
// ca_file = "/dev/zero" would otherwise have Validate read forever.
func safeCAFiles(data []byte) bool {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return true // a syntax error: nothing is read
	}
	safe := true
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "ca_file" && !safeFile(s) {
					safe = false
				}
				walk(e)
			}
		case []map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return safe
}

func safeFile(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for _, dir := range []string{"/dev", "/proc", "/sys"} {
		if abs == dir || strings.HasPrefix(abs, dir+"/") {
			return false
		}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return true // ReadFile fails the same way, at once
	}
	return fi.Mode().IsRegular() && fi.Size() <= 1<<20
}

// A message quoting the user's bytes keeps its line breaks escaped, so
// that -check still prints one line per problem. FuzzParse found the
// syntax error (testdata/fuzz/FuzzParse/syntax-error-newline).
func TestProblemsStayOnOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, path, want string }{
		{"x = 0b\n", "", `line 1: not a binary number: '0b\n'`},
		{"[[upstreams]]\naddress = \"tls://dns.example:853\"\nca_file = \"no\\nsuch\\r.pem\"\n",
			"upstreams[0].ca_file", `open no\nsuch\r.pem: no such file or directory`},
	} {
		_, err := Parse([]byte(tc.src))
		ps := problemsOf(t, err)
		if len(ps) != 1 || ps[0].Path != tc.path || ps[0].Message != tc.want {
			t.Errorf("Parse(%q) = %q, want one problem at %q: %q", tc.src, err, tc.path, tc.want)
		}
		if strings.Count(err.Error(), "\n") != len(ps)-1 {
			t.Errorf("Parse(%q): the report spans more lines than problems:\n%s", tc.src, err)
		}
	}
}
