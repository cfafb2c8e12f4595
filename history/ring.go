package history

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// ring is the queue between the query path and the writer: a bounded
// ring of rows with many producers (Record, on every query's goroutine)
// and one consumer (the writer), after Dmitry Vyukov's bounded queue.
//
// It replaces a channel for what a channel costs here: a send takes the
// channel's lock and writes its counters, so the two cores' queries and
// the writer draining the queue pass one cache line back and forth on
// every row (BenchmarkRecordParallel). A push here is one compare-and-swap
// on the tail and one store into the row's own slot; the writer's read
// takes no lock at all, and a full ring is found by loads alone, so that
// a row dropped at a cache hit's rate writes nothing shared but its
// stripe of the drop counter.
//
// Each slot's seq says whose turn it is, relative to the lap of the
// position that reaches it (lap: the position rounded down to a multiple
// of the size): lap when it is free for that lap's producer, lap+1 once
// filled, lap+size once the writer has read it. A zero slot is free for
// lap 0, so the memory is touched only as the ring first fills.
type ring struct {
	tail atomic.Uint64 // the next position a producer claims; with the sealed bit once sealed
	_    [56]byte
	head atomic.Uint64 // the next position the writer reads; stored by the consumer alone
	_    [56]byte

	slots []ringSlot
	size  uint64
	mask  uint64 // size-1 when size is a power of two, else 0 (positions taken modulo size)

	drops [dropStripes]dropStripe // rows dropped because the ring was full, or after Close
}

type ringSlot struct {
	seq atomic.Uint64
	row queued
}

// dropStripes spreads the drop counter over cache lines: at a cache hit's
// rate most rows are dropped (the writer keeps to its budget), and one
// counter for every core would cost each drop a cache line taken from
// the other core.
const dropStripes = 8

type dropStripe struct {
	n atomic.Uint64
	_ [56]byte
}

// sealed is tail's top bit, set by seal: every push after it fails.
const sealed = 1 << 63

// newRing returns an empty ring of size rows, at least 2 (with one slot,
// a filled slot's seq would read as free for the next lap).
func newRing(size int) *ring {
	if size < 2 {
		panic("history: a ring of fewer than 2 rows")
	}
	r := &ring{slots: make([]ringSlot, size), size: uint64(size)}
	if size&(size-1) == 0 {
		r.mask = uint64(size - 1)
	}
	return r
}

// index is pos's slot and lap.
func (r *ring) index(pos uint64) (*ringSlot, uint64) {
	var i uint64
	if r.mask != 0 {
		i = pos & r.mask
	} else {
		i = pos % r.size
	}
	return &r.slots[i], pos - i
}

// push queues row and reports whether there was room. It never waits:
// it loops only while other producers win the same position.
func (r *ring) push(row *Row) bool {
	pos := r.tail.Load()
	for {
		if pos&sealed != 0 {
			return false
		}
		s, lap := r.index(pos)
		switch seq := s.seq.Load(); {
		case seq == lap: // free: claim it
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.row = queue(row)
				s.seq.Store(lap + 1)
				return true
			}
		case seq < lap: // the previous lap's row, not read yet: full
			return false
		}
		// Another producer claimed pos first, or seal came between.
		pos = r.tail.Load()
	}
}

// pop takes the oldest row into q and reports whether there was one
// ready. A slot claimed but not yet filled ends the read, as an empty
// ring does: its producer signals the writer once it is filled. Only the
// consumer calls it.
func (r *ring) pop(q *queued) bool {
	head := r.head.Load()
	s, lap := r.index(head)
	if s.seq.Load() != lap+1 {
		return false
	}
	*q = s.row
	s.row = queued{} // let the strings go
	s.seq.Store(lap + r.size)
	r.head.Store(head + 1)
	return true
}

// len is how many rows are queued or being queued: a bound, not an
// exact figure, while producers push.
func (r *ring) len() int {
	return int(r.tail.Load()&^sealed - r.head.Load())
}

// seal makes every later push fail. A producer past Record's stop check
// either claimed its position before the seal, and the row is among
// those discard counts, or its push fails and Record counts the drop:
// no row is left in the ring uncounted.
func (r *ring) seal() { r.tail.Or(sealed) }

// discard takes every row left in a sealed ring and counts it dropped.
// A position claimed but not yet filled is waited for: its producer
// stores the row right after its claim, with nothing between that can
// block. Only the consumer calls it, after seal.
func (r *ring) discard() {
	end := r.tail.Load() &^ sealed
	var q queued
	for r.head.Load() < end {
		if !r.pop(&q) {
			runtime.Gosched()
			continue
		}
		r.drop()
	}
}

// drop counts one dropped row in the caller's stripe.
func (r *ring) drop() {
	r.drops[stripe()].n.Add(1)
}

// dropped is the rows drop counted.
func (r *ring) dropped() uint64 {
	var n uint64
	for i := range r.drops {
		n += r.drops[i].n.Load()
	}
	return n
}

// stripe picks a drop counter stripe from the caller's stack address: a
// goroutine keeps its stack (and mostly its core) from row to row, so
// that two cores' query goroutines mostly count into different lines.
// Which stripe is only a matter of speed; dropped sums them all.
func stripe() int {
	var here byte
	p := uintptr(unsafe.Pointer(&here))
	return int((p>>13)^(p>>17)) & (dropStripes - 1)
}
