package history

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
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

// A sealed ring takes no row, and discard counts every row it still held
// as dropped, so that a push racing the History's Close is either
// refused (and its Record counts the drop) or counted by Close. Mutation
// check: a push that ignores the sealed bit takes the row after seal,
// and the row stays in the ring, counted nowhere.
func TestSealedRingRefusesAndCountsWhatItHeld(t *testing.T) {
	t.Parallel()
	r := newRing(4)
	for i := range 2 {
		row := Row{QName: strconv.Itoa(i)}
		if !r.push(&row) {
			t.Fatalf("push %d refused before seal", i)
		}
	}
	r.seal()
	r.seal() // a second seal changes nothing
	late := Row{QName: "late"}
	if r.push(&late) {
		t.Fatal("a push after seal was taken")
	}
	if got := r.len(); got != 2 {
		t.Fatalf("len %d after seal, want 2", got)
	}
	r.discard()
	if got, d := r.len(), r.dropped(); got != 0 || d != 2 {
		t.Fatalf("after discard: len %d, dropped %d; want 0 and 2", got, d)
	}
	var q queued
	if r.pop(&q) {
		t.Fatalf("popped %q after discard", q.qname)
	}
}

// A Record that passed its stop check just before Close, and queues its
// row only after Close's last drain, has the row counted as dropped: it
// is not left in the queue, written by nobody and counted nowhere.
// Mutation check: Close draining the queue without sealing it leaves
// the late row uncounted (dropped 0).
func TestRecordLateForCloseIsCounted(t *testing.T) {
	t.Parallel()
	h := start(acceptingStore{}, config.Default().History, zap.NewNop(), time.Now)
	h.Record(Row{QName: "early."})
	h.Sync()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// A Record that passed its stop check before Close: the writer has
	// ended, so nothing else reads the channel swapped here.
	h.stop = make(chan struct{})
	h.Record(Row{QName: "late."})
	if r, d := h.Rows(), h.Dropped(); r != 1 || d != 1 {
		t.Fatalf("written %d, dropped %d; want 1 and 1", r, d)
	}
	if n := h.queue.len(); n != 0 {
		t.Fatalf("%d rows left in the queue after Close", n)
	}
}

// Every row offered while Close runs is written or counted as dropped:
// Rows()+Dropped() is what the Records offered, however they interleave
// with the writer's end and Close's last drain (run with -race).
func TestRecordRacingCloseIsCounted(t *testing.T) {
	t.Parallel()
	const rounds, producers, each = 200, 4, 50
	for round := range rounds {
		h := start(acceptingStore{}, config.Default().History, zap.NewNop(), time.Now)
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for range producers {
			wg.Go(func() {
				<-begin
				for range each {
					h.Record(Row{QName: "x."})
				}
			})
		}
		close(begin)
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := h.Rows() + h.Dropped(); got != producers*each {
			t.Fatalf("round %d: %d written + %d dropped = %d, want %d",
				round, h.Rows(), h.Dropped(), got, producers*each)
		}
	}
}

// acceptingStore takes every batch at once and keeps nothing.
type acceptingStore struct{ store }

func (acceptingStore) write([]Row) error                       { return nil }
func (acceptingStore) maintain(time.Time, int64) (bool, error) { return false, nil }
func (acceptingStore) used() int64                             { return 0 }
func (acceptingStore) size() int64                             { return 0 }
func (acceptingStore) close() error                            { return nil }
