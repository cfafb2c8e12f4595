package actors

import (
	"context"
	"sync"
	"time"
)

// attemptCtx is one attempt's context: the query's context, ended at the
// attempt's expiry E at the latest, and cancelled when the attempt returns.
//
// context.WithDeadline would do, but it arms a timer and registers with the
// parent on every attempt: four allocations, and a lock that every query's
// attempt shares with every other (the listener's context is one parent for
// all). A transport that bounds its wait with the deadline itself, as the
// UDP and DoT transports do through their readers' read deadlines (see
// wire.LazyContext), needs neither. So attemptCtx arms the timer and the parent watch only when Done
// is first called; until then Err reads the clock and the parent.
//
// It honours the context contract: once Done has been called, Err agrees
// with the channel; before, there is no channel to disagree with.
type attemptCtx struct {
	parent context.Context
	expiry time.Time

	mu      sync.Mutex
	done    chan struct{} // made by the first Done; closed when err is set
	err     error         // why it ended, once it ended
	timer   *time.Timer   // armed by Done: ends it at expiry
	unwatch func() bool   // registered by Done: ends it with the parent
}

var _ context.Context = (*attemptCtx)(nil)

// newAttemptCtx returns the context of an attempt that expires at expiry,
// or earlier when parent has an earlier deadline.
func newAttemptCtx(parent context.Context, expiry time.Time) *attemptCtx {
	if pd, ok := parent.Deadline(); ok && pd.Before(expiry) {
		expiry = pd
	}
	return &attemptCtx{parent: parent, expiry: expiry}
}

// Lazy marks attemptCtx as a wire.LazyContext: a transport may bound its
// I/O by Deadline and notice cancellation by polling Err, without calling
// Done.
func (c *attemptCtx) Lazy() {}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.expiry, true }

func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.check(time.Now())
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.expiry), func() { c.end(context.DeadlineExceeded) })
	if c.parent.Done() != nil {
		c.unwatch = context.AfterFunc(c.parent, func() { c.end(c.parent.Err()) })
	}
	return c.done
}

func (c *attemptCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil || c.err != nil {
		return c.err
	}
	return c.check(time.Now())
}

// check is Err for a context whose Done was never called.
func (c *attemptCtx) check(now time.Time) error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !now.Before(c.expiry) {
		return context.DeadlineExceeded
	}
	return nil
}

// end ends the context with err, unless it has ended already.
func (c *attemptCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if err == nil {
		err = context.Canceled // a done parent's Err is never nil; belt and braces
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// stop cancels the context, as the cancel function of context.WithDeadline
// does, and disarms whatever Done armed. The attempt calls it when the
// transport returns.
func (c *attemptCtx) stop() {
	c.end(context.Canceled)
	c.mu.Lock()
	timer, unwatch := c.timer, c.unwatch
	c.timer, c.unwatch = nil, nil
	c.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	if unwatch != nil {
		unwatch()
	}
}
