//go:build !linux

package history

import "time"

// threadCPU is the wall clock where the thread's CPU time is not read:
// the budget then counts the time the writer waits for a core too.
func threadCPU() time.Duration { return wallClock() }
