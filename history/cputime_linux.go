package history

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used (the writer
// goroutine is locked to its thread): what the writer's budget counts,
// so that the time it waits for a core on a busy machine is not charged
// to it.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return wallClock()
	}
	return time.Duration(ts.Nano())
}
