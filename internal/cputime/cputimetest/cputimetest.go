// Package cputimetest reports a benchmark's CPU time per operation, its
// own thread's, so that a figure taken on a machine shared with other work
// says what an operation costs, not how long the scheduler kept it waiting
// (which ns/op, wall time, includes).
package cputimetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/cputime"
)

// Timer is started by Start and read by Report.
type Timer struct {
	start time.Duration
	ok    bool
}

// Start locks the benchmark to its thread (until it ends) and notes the
// thread's CPU time.
func Start(b *testing.B) *Timer {
	b.Helper()
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	t := &Timer{}
	t.start, t.ok = cputime.Thread()
	return t
}

// Report reports the thread's CPU time since Start per operation as
// cpu-ns/op; nothing where the system does not tell it.
func (t *Timer) Report(b *testing.B, ops int) {
	b.Helper()
	now, ok := cputime.Thread()
	if ok && t.ok && ops > 0 {
		b.ReportMetric(float64(now-t.start)/float64(ops), "cpu-ns/op")
	}
}
