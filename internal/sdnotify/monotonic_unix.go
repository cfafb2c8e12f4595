//go:build unix

package sdnotify

import (
	"time"

	"golang.org/x/sys/unix"
)

// Monotonic returns CLOCK_MONOTONIC, the clock MONOTONIC_USEC is read
// from (Reloading).
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
