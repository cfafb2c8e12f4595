package query

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// cpuTimer measures the CPU time of the benchmark's own thread, so that a
// figure taken on a machine shared with other work says what a query
// costs, not how long the scheduler kept it waiting (which ns/op, wall
// time, includes).
type cpuTimer struct{ start int64 }

func startCPU(b *testing.B) *cpuTimer {
	b.Helper()
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return &cpuTimer{start: threadCPU(b)}
}

// report reports the thread's CPU time per operation as cpu-ns/op.
func (c *cpuTimer) report(b *testing.B, ops int) {
	b.Helper()
	if ops > 0 {
		b.ReportMetric(float64(threadCPU(b)-c.start)/float64(ops), "cpu-ns/op")
	}
}

func threadCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
