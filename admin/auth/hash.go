// Package auth decides who may use the admin API (spec section 13): the
// dashboard's password and its sessions, API tokens with their roles, the
// throttling of failed attempts, the Origin check on every request that
// changes state, and the rule that a listener reachable from the network
// serves only the probes and the metrics until a password is set.
//
// It knows nothing of the routes it guards beyond the few it answers
// itself (the login and logout endpoints and the login page) and the
// three that are always open: a new POST or DELETE endpoint mounted
// behind a Guard is covered by it without a change here.
package auth

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/crypto/bcrypt"
)

// Cost is the bcrypt cost of the hashes HashPassword makes: 2^10 rounds,
// bcrypt's default, about 60-100 ms on a Raspberry Pi 4 and a few ms on a
// server core. That is slow enough that each guess costs an attacker who
// stole the file real time, and quick enough that a login on the
// reference board is not felt. A hash made with another cost (htpasswd
// -B -C 12) is accepted as it is.
const Cost = bcrypt.DefaultCost

// MaxPasswordLen is bcrypt's limit: it reads the first 72 bytes of a
// password and ignores the rest, so a longer one would be only as strong
// as its start while its owner believed otherwise. HashPassword refuses
// it, and a login with one is a failure.
const MaxPasswordLen = 72

// Errors of HashPassword and CheckHash.
var (
	ErrEmptyPassword   = errors.New("the password is empty")
	ErrPasswordTooLong = fmt.Errorf("the password is longer than %d bytes, which bcrypt ignores past that", MaxPasswordLen)
)

// HashPassword returns the bcrypt hash of password (a dashboard password
// or an API token) at Cost, salted, in the "$2a$10$…" form that
// admin.password_hash and admin.tokens[].hash take.
func HashPassword(password []byte) (string, error) {
	switch {
	case len(password) == 0:
		return "", ErrEmptyPassword
	case len(password) > MaxPasswordLen:
		return "", ErrPasswordTooLong
	}
	h, err := bcrypt.GenerateFromPassword(password, Cost)
	if err != nil {
		return "", fmt.Errorf("hashing the password: %w", err)
	}
	return string(h), nil
}

// CheckHash reports whether hash is a bcrypt hash that a password can be
// checked against, saying why not otherwise; configuration validation
// calls it for every hash, so that a mistyped one is found by -check and
// not at the first login.
func CheckHash(hash string) error {
	if hash == "" {
		return errors.New("is empty")
	}
	cost, err := bcrypt.Cost([]byte(hash))
	if err != nil {
		return fmt.Errorf("is not a bcrypt hash such as nxdnsd -hash-password prints ($2a$10$ and 53 characters): %w", err)
	}
	// bcrypt.Cost reads only the prefix: a hash cut short (a line
	// broken in an editor) would fail every login without a word.
	if len(hash) != 60 {
		return fmt.Errorf("is %d characters long; a bcrypt hash is 60", len(hash))
	}
	if cost > maxCost {
		return fmt.Errorf("has cost %d; at most %d is accepted, as a login on a small board would take minutes", cost, maxCost)
	}
	return nil
}

// maxCost bounds the cost of a hash in the configuration: each step
// doubles a check's time, and at 15 one login takes about 3 s on a
// Raspberry Pi 4, which is where waiting turns into a denial of service.
const maxCost = 15

// Loopback reports whether the admin listen address listen ("IP:PORT")
// is a loopback address (127.0.0.0/8, ::1). Any other, the unspecified
// 0.0.0.0 and [::] included, is reachable from the network, and without a
// password serves only the probes and the metrics. An address that does
// not parse is not loopback: the rule fails closed.
func Loopback(listen string) bool {
	ap, err := netip.ParseAddrPort(listen)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// checkPassword reports whether password matches hash. It costs a bcrypt
// hashing (tens of milliseconds): callers hold no lock while it runs.
func checkPassword(hash []byte, password []byte) bool {
	if len(password) == 0 || len(password) > MaxPasswordLen {
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, password) == nil
}
