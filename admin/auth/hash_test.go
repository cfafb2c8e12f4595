package auth

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestHashPassword(t *testing.T) {
	t.Parallel()
	h, err := HashPassword([]byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	if cost, err := bcrypt.Cost([]byte(h)); err != nil || cost != Cost {
		t.Errorf("hash %q: cost %d (%v), want %d", h, cost, err, Cost)
	}
	if err := CheckHash(h); err != nil {
		t.Errorf("CheckHash(HashPassword(…)): %v", err)
	}
	if !checkPassword([]byte(h), []byte("correct horse")) || checkPassword([]byte(h), []byte("correct horsf")) {
		t.Error("the hash does not check its password, or checks another")
	}
	if h2, _ := HashPassword([]byte("correct horse")); h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	if _, err := HashPassword(nil); !errors.Is(err, ErrEmptyPassword) {
		t.Errorf("empty: %v", err)
	}
	long := []byte(strings.Repeat("a", MaxPasswordLen+1))
	if _, err := HashPassword(long); !errors.Is(err, ErrPasswordTooLong) {
		t.Errorf("73 bytes: %v", err)
	}
	// bcrypt would take the first 72 bytes of a longer one as the whole.
	h72 := quickHash(t, string(long[:MaxPasswordLen]))
	if checkPassword([]byte(h72), long) {
		t.Error("a 73-byte password matched the hash of its first 72 bytes")
	}
}

func TestCheckHash(t *testing.T) {
	t.Parallel()
	good := quickHash(t, "pw")
	cost16, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	cost16 = []byte(strings.Replace(string(cost16), "$04$", "$16$", 1))
	for _, tc := range []struct {
		hash, want string // want: "" valid, else part of the message
	}{
		{good, ""},
		{"$2y$04$" + good[7:], ""}, // htpasswd -B writes $2y$
		{"", "is empty"},
		{"hunter2", "is not a bcrypt hash"},
		{"$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", "is not a bcrypt hash"},
		{good[:59], "is 59 characters long"},
		{string(cost16), "has cost 16"},
	} {
		err := CheckHash(tc.hash)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckHash(%q): %v, want valid", tc.hash, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckHash(%q): %v, want an error saying %q", tc.hash, err, tc.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]bool{
		"127.0.0.1:8053":   true,
		"127.0.0.2:8053":   true,
		"[::1]:8053":       true,
		"0.0.0.0:8053":     false, // every address, the LAN's included
		"[::]:8053":        false,
		"192.168.1.2:8053": false,
		"[fe80::1]:8053":   false,
		"localhost:8053":   false, // not an address: fail closed
		"":                 false,
	} {
		if got := Loopback(listen); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", listen, got, want)
		}
	}
}
