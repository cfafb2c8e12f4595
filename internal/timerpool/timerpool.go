// Package timerpool keeps stopped timers for reuse, so that code on the
// query path that waits with a timeout does not make a timer, and garbage,
// per wait.
//
// Since Go 1.23, Stop and Reset leave no stale tick in a timer's channel,
// which is what makes the reuse safe. A Pool belongs to one owner (a pool of
// upstreams, a transport), so that under testing/synctest the timers of one
// bubble are never used in another.
package timerpool

import (
	"sync"
	"time"
)

// Pool is a set of stopped timers. The zero value is ready to use.
type Pool struct {
	timers sync.Pool // *time.Timer, stopped
}

// Get returns a timer that fires after d.
func (p *Pool) Get(d time.Duration) *time.Timer {
	if t, ok := p.timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// Put stops t and keeps it for another Get. The caller no longer uses it.
func (p *Pool) Put(t *time.Timer) {
	t.Stop()
	p.timers.Put(t)
}
