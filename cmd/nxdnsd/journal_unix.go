//go:build unix

package main

import (
	"os"
	"syscall"
)

// sameStream reports whether f is the file env ("DEVICE:INODE", as
// $JOURNAL_STREAM) names.
func sameStream(f *os.File, env string) bool {
	dev, ino, ok := parseStream(env)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == dev && uint64(st.Ino) == ino //nolint:unconvert // the field types differ by platform
}
