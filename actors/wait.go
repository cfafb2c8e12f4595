package actors

import (
	"errors"
	"math/bits"
	"reflect"
	"time"
)

// errKicked ends one round of a slot wait: a client below its share began
// to wait too (share.go), and the waiter weighs its own share again.
var errKicked = errors.New("woken to weigh the client's share")

// wait blocks until a slot frees on ANY upstream in the mask (a freed
// lower-priority slot wakes the query too), the deadline passes
// (ErrBudgetExhausted), the query's context ends (its error) or, for a
// query whose client is over its share of the slots, another client below
// its share starts to wait (ErrShareRefused). On success the returned
// permit holds a slot on the upstream that freed; on error nothing is
// held. One select decides each round, so exactly one case wins and a
// permit can be neither taken twice nor lost.
//
// Every call that actually waits counts once in the queued counters,
// whatever ends it.
func (d *dispatch) wait(mask uint64) (permit, error) {
	start := d.now // nothing has blocked since it was read
	remaining := d.deadline.Sub(start)
	if remaining <= 0 {
		return permit{}, ErrBudgetExhausted
	}
	p := d.pool
	p.queued.Add(1)
	s, c := p.shares, d.client
	var kick chan struct{} // nil, which never fires, for a query of nxdnsd's own
	done := d.ctx.Done()   // nil once the kick stands for it (adopt)
	adopted := false
	lone := false
	took := false // the wait ends holding a slot, counted as c's
	if c != nil {
		c.add(0, 1)
		// A waiter that begins alone may be over its share once others
		// come: it is what a kick is for. One that begins among others is
		// below its share (run refused it otherwise), and wakes the lone
		// ones.
		//
		// A lone waiter reads the kick channel before it counts itself
		// lone, and counts the clients again after: a client below its
		// share that starts to wait meanwhile either sees it lone, and
		// closes a channel it holds, or arrived before the second count,
		// which then sees it. Go's atomics are sequentially consistent, so
		// one of the two holds.
		lone = s.clients(start) == 1
		if lone {
			kick = *s.kick.Load()
			s.addWaits(waitOneLone)
		} else {
			if loneOf(s.addWaits(waitOne)) > 0 {
				s.wake()
			}
			kick = *s.kick.Load() // after its own kick, which is not for it
		}
		if done != nil && s.adopt(d.ctx, done) {
			adopted, done = true, nil // ctx's end closes the kick channel
		}
	}
	defer func() {
		if c != nil {
			if lone {
				s.addWaits(-waitOneLone)
			} else {
				s.addWaits(-waitOne)
			}
			held := 0
			if took {
				held = 1 // from waiting to holding, in one add
			}
			c.add(held, -1)
		}
		d.now = time.Now()
		w := d.now.Sub(start)
		d.res.Queued += w
		p.queuedNanos.Add(int64(w))
	}()
	kicked := lone && s.clients(time.Now()) > 1

	timer := p.timers.Get(remaining)
	defer p.timers.Put(timer)

	for {
		if kicked {
			// Woken (or found among others after all): weigh the share
			// again, the next kick channel read first for the same reason
			// as above.
			kick = *s.kick.Load()
			d.now = time.Now()
			if d.refused(waiting) {
				return permit{}, ErrShareRefused
			}
			if lone && s.clients(d.now) > 1 {
				lone = false
				s.addWaits(waitOne - waitOneLone) // no longer lone; still waiting
			}
			kicked = false
		}
		if adopted {
			// After this round's read of the kick channel: an end of
			// ctx that this misses closes that channel.
			if err := d.ctx.Err(); err != nil {
				return permit{}, err
			}
		}
		var i int
		var err error
		if bits.OnesCount64(mask) <= len(fixedWait{}.ch) {
			i, err = d.waitFixed(mask, timer.C, done, kick)
		} else {
			i, err = d.waitReflect(mask, timer.C, done, kick)
		}
		switch {
		case err == errKicked:
			kicked = true
			continue // then at the back of the queue, behind the waiter that woke us
		case err != nil:
			return permit{}, err
		}
		// The slot is held, and counted as c's by the deferred add.
		took = true
		return permit{u: p.upstreams[i], c: c, i: i, slot: true}, nil
	}
}

// fixedWait holds up to four slot channels for one select statement; an
// absent one is nil, and a send on a nil channel never proceeds. Most pools
// have one to four upstreams, and this path allocates nothing.
type fixedWait struct {
	ch  [4]chan struct{}
	idx [4]int
}

func (d *dispatch) waitFixed(mask uint64, deadline <-chan time.Time, done, kick <-chan struct{}) (int, error) {
	var w fixedWait
	n := 0
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		w.ch[n], w.idx[n] = d.pool.upstreams[i].slots, i
		n++
	}
	tok := struct{}{}
	select {
	case w.ch[0] <- tok:
		return w.idx[0], nil
	case w.ch[1] <- tok:
		return w.idx[1], nil
	case w.ch[2] <- tok:
		return w.idx[2], nil
	case w.ch[3] <- tok:
		return w.idx[3], nil
	case <-deadline:
		return -1, ErrBudgetExhausted
	case <-done:
		return -1, d.ctx.Err()
	case <-kick:
		return -1, errKicked
	}
}

// waitReflect is the same select over any number of upstreams.
func (d *dispatch) waitReflect(mask uint64, deadline <-chan time.Time, done, kick <-chan struct{}) (int, error) {
	n := bits.OnesCount64(mask)
	cases := make([]reflect.SelectCase, 0, n+3)
	idx := make([]int, 0, n)
	tok := reflect.ValueOf(struct{}{})
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectSend, Chan: reflect.ValueOf(d.pool.upstreams[i].slots), Send: tok})
		idx = append(idx, i)
	}
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(kick)},
	)
	chosen, _, _ := reflect.Select(cases)
	switch {
	case chosen < n:
		return idx[chosen], nil
	case chosen == n:
		return -1, ErrBudgetExhausted
	case chosen == n+1:
		return -1, d.ctx.Err()
	default:
		return -1, errKicked
	}
}
