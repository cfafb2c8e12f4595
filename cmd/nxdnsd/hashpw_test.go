package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/nxdnsd/nxdnsd/admin/auth"
	"github.com/nxdnsd/nxdnsd/config"
)

// -hash-password prints a bcrypt hash of the first line of its input,
// the line's end excluded and its spaces kept, that the configuration
// takes as admin.password_hash.
func TestHashPassword(t *testing.T) {
	t.Parallel()
	for in, pw := range map[string]string{
		"correct horse\n":   "correct horse",
		"correct horse\r\n": "correct horse",
		" spaced \nnext\n":  " spaced ",
		"no newline":        "no newline",
	} {
		var out, errb bytes.Buffer
		if code := hashPassword(strings.NewReader(in), &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%q: exit %d, stderr %q", in, code, errb.String())
		}
		h, ok := strings.CutSuffix(out.String(), "\n")
		if !ok || strings.Contains(h, "\n") {
			t.Fatalf("%q: stdout %q, want one line", in, out.String())
		}
		if err := bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)); err != nil {
			t.Errorf("%q: the hash does not check %q: %v", in, pw, err)
		}
		if cost, _ := bcrypt.Cost([]byte(h)); cost != auth.Cost {
			t.Errorf("cost %d, want %d", cost, auth.Cost)
		}
		if _, err := config.Parse([]byte("[admin]\npassword_hash = \"" + h + "\"\n")); err != nil {
			t.Errorf("the configuration refuses the hash: %v", err)
		}
	}
}

func TestHashPasswordRefuses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                             "empty",
		"\n":                           "empty",
		strings.Repeat("x", 73) + "\n": "longer than 72 bytes",
		strings.Repeat("x", 2000):      "over 1024 bytes",
	} {
		var out, errb bytes.Buffer
		code := hashPassword(strings.NewReader(in), &out, &errb)
		if code != exitConfig || out.Len() != 0 || !strings.HasPrefix(errb.String(), "nxdnsd: -hash-password: ") || !strings.Contains(errb.String(), want) {
			t.Errorf("%.20q…: exit %d, stdout %q, stderr %q; want 2 and a line saying %q", in, code, out.String(), errb.String(), want)
		}
	}
}

// The flag, as a process: the password on standard input, the hash on
// standard output, nothing else.
func TestHashPasswordFlag(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(buildBinary(t), "-hash-password")
	cmd.Stdin = strings.NewReader("s3cret\n")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil || errb.Len() != 0 {
		t.Fatalf("%v, stderr %q", err, errb.String())
	}
	if bcrypt.CompareHashAndPassword(bytes.TrimSuffix(out, []byte("\n")), []byte("s3cret")) != nil {
		t.Errorf("stdout %q is not a hash of the password", out)
	}
}
