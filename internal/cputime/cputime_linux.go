// Package cputime reads the CPU time of the calling thread: what a piece
// of work costs, not how long the scheduler kept it waiting. A goroutine
// that reads it locks itself to its thread first (runtime.LockOSThread).
package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Thread is the CPU time the calling thread has used, and whether the
// system tells it.
func Thread() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
