//go:build !unix

package sdnotify

import "time"

// Monotonic returns 0: there is no systemd to compare it with.
func Monotonic() time.Duration { return 0 }
