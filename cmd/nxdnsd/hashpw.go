package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nxdnsd/nxdnsd/admin/auth"
)

// maxSecretLine bounds what -hash-password reads: a password is at most
// auth.MaxPasswordLen bytes, and a line far past it is a mistake (a file
// fed in whole), refused rather than read to its end.
const maxSecretLine = 1 << 10

// hashPassword is nxdnsd -hash-password: it reads a password (or an API
// token) from the first line of in and prints its bcrypt hash, for
// admin.password_hash or an admin.tokens hash, on stdout. The line's end
// ("\n" or "\r\n") is not part of the password; everything else is,
// spaces included. It returns the exit code: 0, or 2 for a password
// that cannot be hashed, said on stderr.
func hashPassword(in io.Reader, stdout, stderr io.Writer) int {
	if isTerminal(in) {
		fmt.Fprint(stderr, "Password (shown as you type; pipe it in to hide it), then Enter: ")
	}
	pw, err := readSecret(in)
	if err == nil {
		var h string
		if h, err = auth.HashPassword([]byte(pw)); err == nil {
			fmt.Fprintln(stdout, h)
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "nxdnsd: -hash-password: %v\n", err)
	return exitConfig
}

// readSecret returns the first line of in without its end.
func readSecret(in io.Reader) (string, error) {
	r := bufio.NewReaderSize(io.LimitReader(in, maxSecretLine+1), maxSecretLine+1)
	line, err := r.ReadString('\n')
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return "", fmt.Errorf("reading standard input: %w", err)
	case len(line) > maxSecretLine:
		return "", fmt.Errorf("the first line is over %d bytes; a password has at most %d", maxSecretLine, auth.MaxPasswordLen)
	}
	line = strings.TrimSuffix(line, "\n")
	return strings.TrimSuffix(line, "\r"), nil
}

// isTerminal reports whether in is a terminal, where a prompt helps.
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
