package history

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A ring takes exactly its size before it is full, gives the rows back
// in order, and takes as many again once read, lap after lap; sizes that
// are not powers of two included. Mutation checks: a push that ignores
// the previous lap's row (no "full" case) overwrites unread rows and
// fails the order; a pop that does not wait for seq lap+1 reads a slot
// twice.
func TestRingIsBoundedAndOrdered(t *testing.T) {
	t.Parallel()
	for _, size := range []int{2, 3, 8, 1000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r := newRing(size)
			next := 0
			for lap := range 4 {
				for i := range size {
					row := Row{QName: strconv.Itoa(lap*size + i)}
					if !r.push(&row) {
						t.Fatalf("lap %d: push %d of %d refused", lap, i, size)
					}
				}
				row := Row{QName: "one too many"}
				if r.push(&row) {
					t.Fatalf("lap %d: a push past the size (%d) was taken", lap, size)
				}
				if got := r.len(); got != size {
					t.Fatalf("lap %d: len %d, want %d", lap, got, size)
				}
				var q queued
				for r.pop(&q) {
					if q.qname != strconv.Itoa(next) {
						t.Fatalf("lap %d: popped %q, want %d", lap, q.qname, next)
					}
					next++
				}
				if next != (lap+1)*size || r.len() != 0 {
					t.Fatalf("lap %d: %d rows read, len %d after", lap, next, r.len())
				}
			}
		})
	}
}

// Producers on every core and one consumer at once (run with -race):
// every row pushed is read exactly once and each producer's rows in the
// order it pushed them; every refused push is a row counted as dropped,
// so that pushed + dropped is what was offered.
func TestRingConservesRowsUnderContention(t *testing.T) {
	t.Parallel()
	const producers, each = 4, 20000
	r := newRing(64) // small: the ring is full often, and laps many times
	var wg sync.WaitGroup
	pushed := make([]int, producers)
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				row := Row{QType: uint16(p), Duration: time.Duration(i)}
				if r.push(&row) {
					pushed[p]++
				} else {
					r.drop()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := make([]int, producers)
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	read := func(q *queued) {
		p := int(q.qtype)
		i := int(q.duration)
		if i <= last[p] {
			t.Fatalf("producer %d: row %d read after row %d", p, i, last[p])
		}
		last[p] = i
		seen[p]++
	}
	var q queued
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for r.pop(&q) {
			read(&q)
		}
	}
	for r.pop(&q) {
		read(&q)
	}
	total := 0
	for p := range producers {
		if seen[p] != pushed[p] {
			t.Errorf("producer %d: %d rows pushed, %d read", p, pushed[p], seen[p])
		}
		total += pushed[p]
	}
	if got := uint64(total) + r.dropped(); got != producers*each {
		t.Errorf("pushed %d + dropped %d = %d, want %d", total, r.dropped(), got, producers*each)
	}
	t.Logf("%d rows through a 64-row ring, %d dropped", total, r.dropped())
}
