package actors

import (
	"math/bits"
	"reflect"
	"time"
)

// wait blocks until a slot frees on ANY upstream in the mask (a freed
// lower-priority slot wakes the query too), the deadline passes
// (ErrBudgetExhausted) or the query's context ends (its error). On
// success the returned permit holds a slot on the upstream that freed; on
// error nothing is held. One select decides, so exactly one case wins and a permit can
// be neither taken twice nor lost.
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
	defer func() {
		d.now = time.Now()
		w := d.now.Sub(start)
		d.res.Queued += w
		p.queuedNanos.Add(int64(w))
	}()

	timer := p.timers.Get(remaining)
	defer p.timers.Put(timer)

	var i int
	var err error
	if bits.OnesCount64(mask) <= len(fixedWait{}.ch) {
		i, err = d.waitFixed(mask, timer.C)
	} else {
		i, err = d.waitReflect(mask, timer.C)
	}
	if err != nil {
		return permit{}, err
	}
	return permit{u: p.upstreams[i], i: i, slot: true}, nil
}

// fixedWait holds up to four slot channels for one select statement; an
// absent one is nil, and a send on a nil channel never proceeds. Most pools
// have one to four upstreams, and this path allocates nothing.
type fixedWait struct {
	ch  [4]chan struct{}
	idx [4]int
}

func (d *dispatch) waitFixed(mask uint64, deadline <-chan time.Time) (int, error) {
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
	case <-d.ctx.Done():
		return -1, d.ctx.Err()
	}
}

// waitReflect is the same select over any number of upstreams.
func (d *dispatch) waitReflect(mask uint64, deadline <-chan time.Time) (int, error) {
	n := bits.OnesCount64(mask)
	cases := make([]reflect.SelectCase, 0, n+2)
	idx := make([]int, 0, n)
	tok := reflect.ValueOf(struct{}{})
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectSend, Chan: reflect.ValueOf(d.pool.upstreams[i].slots), Send: tok})
		idx = append(idx, i)
	}
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(d.ctx.Done())},
	)
	chosen, _, _ := reflect.Select(cases)
	switch {
	case chosen < n:
		return idx[chosen], nil
	case chosen == n:
		return -1, ErrBudgetExhausted
	default:
		return -1, d.ctx.Err()
	}
}
