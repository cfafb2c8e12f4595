//go:build unix

package config

import "golang.org/x/sys/unix"

// writable reports whether the user running nxdnsd may write to path (a
// file, or a directory to create a file in): access(2), which also says
// no on a read-only filesystem. A privileged user may write anywhere
// else, so a check run as root says nothing of a daemon run as another
// user.
func writable(path string) error { return unix.Access(path, unix.W_OK) }
