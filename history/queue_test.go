package history

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
)

// blockedStore is a store whose writes wait for release: the writer
// falls behind as far as a test wants.
type blockedStore struct {
	store
	entered chan int      // the size of each batch as its write begins
	release chan struct{} // closed to let every write finish
}

func (b *blockedStore) write(rows []Row) error {
	select {
	case b.entered <- len(rows):
	default: // nobody is watching any more
	}
	<-b.release
	return nil
}

func (b *blockedStore) maintain(time.Time, int64) (bool, error) { return false, nil }
func (b *blockedStore) used() int64                             { return 0 }
func (b *blockedStore) size() int64                             { return 0 }
func (b *blockedStore) close() error                            { return nil }

// While the writer is stuck, the queue takes QueueSize rows and Record
// drops and counts every row past them, without waiting: the test ends
// only because no Record blocks. Close then writes what was queued.
// Mutation check: a blocking send in Record hangs this test.
func TestFullQueueDropsAndCounts(t *testing.T) {
	t.Parallel()
	bs := &blockedStore{entered: make(chan int, 16), release: make(chan struct{})}
	h := start(bs, config.Default().History, zap.NewNop(), time.Now)
	h.Record(Row{QName: "first."})
	if n := <-bs.entered; n != 1 {
		t.Fatalf("first batch of %d rows, want 1", n)
	}
	for range QueueSize + 10 {
		h.Record(Row{QName: "x."})
	}
	if d := h.Dropped(); d != 10 {
		t.Errorf("dropped %d, want 10", d)
	}
	close(bs.release)
	h.Sync()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if r := h.Rows(); r != 1+QueueSize {
		t.Errorf("rows written %d, want %d", r, 1+QueueSize)
	}
	h.Record(Row{})
	if d := h.Dropped(); d != 11 {
		t.Errorf("after Close: dropped %d, want 11", d)
	}
}

// Retention deletes exactly the rows before the cutoff, in chunks, and
// their counters; a chunk on both sides of the cutoff keeps only its new
// rows' names.
// Mutation check: "id <= ?" in trim deletes the row at the cutoff.
func TestRetentionDeletesExactlyWhatIsOld(t *testing.T) {
	t.Parallel()
	s, err := openSQLite("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.chunk, s.rowsPerChunk = 500, 500
	base := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Hour)
	var rows []Row
	// Three whole chunks of old rows and a part of one; as many new.
	const old = 3*500 + 7
	const n = 2 * old
	for i := range n {
		name := "keep.example."
		if i < old {
			name = "old" + strconv.Itoa(i%50) + ".example."
		}
		rows = append(rows, Row{Time: base.Add(time.Duration(i) * time.Second), QName: name, QType: 1, Source: "cache", Proto: "udp"})
	}
	for i := 0; i < len(rows); i += maxBatch {
		if err := s.write(rows[i:min(i+maxBatch, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := rows[old].Time
	calls := 0
	for more := true; more; calls++ {
		if more, err = s.maintain(cutoff, 1<<40); err != nil {
			t.Fatal(err)
		}
	}
	if calls < 3 {
		t.Errorf("maintain finished in %d calls; want chunks of %d", calls, s.chunk)
	}
	ctx := context.Background()
	var count, oldest int64
	if err := s.r.QueryRowContext(ctx, `SELECT sum(n), min(first) FROM chunks`).Scan(&count, &oldest); err != nil {
		t.Fatal(err)
	}
	if count != n-old || oldest != s.key(cutoff) {
		t.Errorf("%d rows left, oldest %v; want %d, %v", count, s.time(oldest), n-old, cutoff)
	}
	// The chunk cut at the cutoff holds no old name any more.
	names, err := s.top(ctx, TopDomains, "", base, base.Add(time.Duration(n)*time.Second), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0].Key != "keep.example." || names[0].Count != n-old {
		t.Errorf("names left %v, want only keep.example. %d times", names, n-old)
	}
	tl, err := s.timeline(ctx, "", base, base.Add(time.Duration(n)*time.Second), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, b := range tl {
		total += b.N[outCached]
	}
	if total != count {
		t.Errorf("timeline counts %d rows, want %d", total, count)
	}
}

// Past max_mib the oldest rows go, until the pages in use are under the
// low water mark.
func TestRetentionKeepsUnderMaxBytes(t *testing.T) {
	t.Parallel()
	s, err := openSQLite("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	base := time.Now().Add(-time.Hour)
	var rows []Row
	for i := range 4000 {
		rows = append(rows, Row{Time: base.Add(time.Duration(i) * time.Millisecond), QName: "n" + strconv.Itoa(i) + ".example.", QType: 1})
	}
	for i := 0; i < len(rows); i += maxBatch {
		if err := s.write(rows[i:min(i+maxBatch, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	full := s.used()
	limit := full / 2
	for more := true; more; {
		if more, err = s.maintain(base.Add(-time.Hour), limit); err != nil {
			t.Fatal(err)
		}
	}
	if u := s.used(); float64(u) > float64(limit)*highWater {
		t.Errorf("%d bytes in use after trimming to %d (from %d)", u, limit, full)
	}
	var count int64
	if err := s.r.QueryRow(`SELECT coalesce(sum(n), 0) FROM chunks`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count == 0 || count >= 4000 {
		t.Errorf("%d rows left", count)
	}
	var newest int64
	if err := s.r.QueryRow(`SELECT max(last) FROM chunks`).Scan(&newest); err != nil || newest != s.key(rows[len(rows)-1].Time) {
		t.Errorf("newest row %v, %v: want the newest kept", s.time(newest), err)
	}
}

// failingStore fails every write, as a full disk does.
type failingStore struct{ blockedStore }

func (*failingStore) write([]Row) error { return errors.New("disk full") }

// Rows whose batch fails to be written are dropped and counted, and the
// failure is logged at error level, once a minute however many batches
// fail.
func TestFailedWritesDropAndCount(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.ErrorLevel)
	h := start(&failingStore{}, config.Default().History, zap.New(core), time.Now)
	for range 3 {
		h.Record(Row{QName: "a."})
		h.Sync()
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if h.Dropped() != 3 || h.Rows() != 0 {
		t.Errorf("dropped %d, written %d; want 3, 0", h.Dropped(), h.Rows())
	}
	if logs.Len() != 1 {
		t.Errorf("%d error lines, want 1: %v", logs.Len(), logs.All())
	}
}

// stalled starts a History whose writer is stuck in its first write, so
// that Record is measured alone: nothing else allocates meanwhile.
func stalled(tb testing.TB) (*History, func()) {
	bs := &blockedStore{entered: make(chan int, 1), release: make(chan struct{})}
	h := start(bs, config.Default().History, zap.NewNop(), time.Now)
	h.Record(Row{})
	<-bs.entered
	return h, func() {
		close(bs.release)
		h.Close()
	}
}

// drainQueue empties the queue, as the writer would (which is stalled:
// the caller is the ring's one consumer meanwhile).
func drainQueue(h *History) {
	var q queued
	for h.queue.pop(&q) {
	}
}

// Record is a copy of the row's value into the ring: no allocation, the row's
// strings shared. (Not parallel: AllocsPerRun counts every goroutine's.)
func TestRecordAllocatesNothing(t *testing.T) {
	h, stop := stalled(t)
	defer stop()
	row := Row{Time: time.Now(), Proto: "udp", QName: "example.com.", QType: 1, Source: "cache"}
	if n := testing.AllocsPerRun(1000, func() { h.Record(row) }); n != 0 {
		t.Errorf("Record allocates %v times per row, want 0", n)
	}
	drainQueue(h)
}

// BenchmarkRecord is the query path's cost of the history: one Record
// into a queue with room.
func BenchmarkRecord(b *testing.B) {
	h, stop := stalled(b)
	defer stop()
	row := Row{Time: time.Now(), Proto: "udp", QName: "example.com.", QType: 1, Source: "cache"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%(QueueSize/2) == 0 {
			b.StopTimer()
			drainQueue(h)
			b.StartTimer()
		}
		h.Record(row)
	}
	if h.Dropped() != 0 {
		b.Errorf("%d dropped", h.Dropped())
	}
}

// BenchmarkRecordParallel: both cores' query goroutines recording at
// once, as under load (the channel's lock is shared).
func BenchmarkRecordParallel(b *testing.B) {
	h, stop := stalled(b)
	defer stop()
	row := Row{Time: time.Now(), Proto: "udp", QName: "example.com.", QType: 1, Source: "cache"}
	done := make(chan struct{})
	go func() { // the writer's part: keep the queue from filling
		var q queued
		for {
			select {
			case <-done:
				return
			case <-h.wake:
				for h.queue.pop(&q) {
				}
			}
		}
	}()
	defer close(done)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Record(row)
		}
	})
	b.ReportMetric(float64(h.Dropped())/float64(b.N), "dropped/op")
}

// The writer enforces retention itself: a history opened on rows older
// than retention_days deletes them at start, a chunk at a time, without a
// row or a tick to wake it between chunks.
// Mutation checks: starting run with maintain false keeps the old rows;
// waiting for rows between chunks (no default case) never finishes.
func TestWriterEnforcesRetentionAtStart(t *testing.T) {
	t.Parallel()
	s, err := openSQLite("")
	if err != nil {
		t.Fatal(err)
	}
	s.chunk, s.rowsPerChunk = 100, 100
	old := time.Now().Add(-10 * 24 * time.Hour)
	var rows []Row
	for i := range 1000 {
		rows = append(rows, Row{Time: old.Add(time.Duration(i) * time.Second), QName: "old.example.", QType: 1})
	}
	if err := s.write(rows); err != nil {
		t.Fatal(err)
	}
	maintained := make(chan bool)
	h := startHooked(s, config.Default().History, zap.NewNop(), time.Now, maintained)
	chunks := 0
	for more := true; more; chunks++ {
		more = <-maintained
	}
	go func() { // later ticks' maintenance, until Close
		for range maintained {
		}
	}()
	defer close(maintained)
	defer h.Close()
	var count int
	if err := s.r.QueryRow(`SELECT coalesce(sum(n), 0) FROM chunks`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 0 || chunks < 10 {
		t.Errorf("%d rows left after %d chunks, want 0 after 10 or more", count, chunks)
	}
}

// Rows arriving one after another within batchDelay go into one batch
// (one transaction), however soon the writer wakes for the first; a Sync
// ends the wait at once. In a synctest bubble the delay passes only when
// every goroutine waits, so the rows are all queued by then.
func TestWriterGathersABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := &blockedStore{entered: make(chan int, 16), release: make(chan struct{})}
		close(bs.release)
		h := start(bs, config.Default().History, zap.NewNop(), time.Now)
		start := time.Now()
		for i := range 50 {
			h.Record(Row{QName: "n" + strconv.Itoa(i) + "."})
			runtime.Gosched() // the writer may take the first row at once
		}
		if n := <-bs.entered; n != 50 {
			t.Errorf("first batch of %d rows, want 50", n)
		}
		if el := time.Since(start); el != batchDelay {
			t.Errorf("written after %v, want %v", el, batchDelay)
		}
		h.Record(Row{QName: "last."})
		synctest.Wait() // the writer waits for more
		h.Sync()
		if n := <-bs.entered; n != 1 || time.Since(start) != batchDelay {
			t.Errorf("after Sync: batch of %d rows at %v, want 1 at %v", n, time.Since(start), batchDelay)
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if r := h.Rows(); r != 51 {
			t.Errorf("rows %d, want 51", r)
		}
	})
}

// slowStore takes perRow of (fake) time a row to write, and adds it up.
type slowStore struct {
	blockedStore
	perRow time.Duration
	busy   time.Duration
	n      int
}

func (s *slowStore) write(rows []Row) error {
	d := time.Duration(len(rows)) * s.perRow
	time.Sleep(d) // the write's length, in the bubble's clock
	s.busy += d
	s.n += len(rows)
	return nil
}

// The writer spends at most writerShare of one core writing, over a
// burst: rows that come faster are dropped and counted, and no Record
// waits. Without the budget the same rows are all written. Mutation
// check: take without its pause writes every row and fails the bound.
func TestWriterKeepsToItsBudget(t *testing.T) {
	for _, budget := range []bool{true, false} {
		t.Run(fmt.Sprintf("budget=%v", budget), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 200,000 rows/s at most; a batch of 4,096 rows takes 20 ms,
				// less than the share buys in maxPause (the pause's bound).
				st := &slowStore{perRow: 5 * time.Microsecond}
				h := startWith(st, config.Default().History, zap.NewNop(), time.Now, options{queue: 4096, noBudget: !budget, busy: wallClock})
				const perMs, ms = 20, 4000 // 20,000 rows/s for 4 s: 10 % of a core's worth
				begin := time.Now()
				for range ms {
					for range perMs {
						h.Record(Row{QName: "x."})
					}
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(begin)
				h.Sync()
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
				total := uint64(perMs * ms)
				if h.Rows()+h.Dropped() != total || h.Rows() != uint64(st.n) {
					t.Fatalf("rows %d + dropped %d, want %d; the store has %d", h.Rows(), h.Dropped(), total, st.n)
				}
				if !budget {
					if h.Dropped() != 0 {
						t.Errorf("%d rows dropped without a budget", h.Dropped())
					}
					return
				}
				// The busy time while rows flowed: the final Sync and
				// Close write what was queued (at most the queue) too.
				bound := time.Duration(float64(elapsed)*writerShare) + writerBurst + 4096*st.perRow + maxBatch*st.perRow
				t.Logf("busy %v of %v (bound %v), %d rows written, %d dropped", st.busy, elapsed, bound, h.Rows(), h.Dropped())
				if st.busy > bound || h.Dropped() == 0 {
					t.Errorf("the writer was busy %v of %v (bound %v), %d rows dropped", st.busy, elapsed, bound, h.Dropped())
				}
			})
		})
	}
}

// BenchmarkRecordFull: both cores recording into a full queue (the writer
// paused by its budget, or stalled): what a dropped row costs a query.
func BenchmarkRecordFull(b *testing.B) {
	h, stop := stalled(b)
	defer stop()
	row := Row{Time: time.Now(), Proto: "udp", QName: "example.com.", QType: 1, Source: "cache"}
	for h.Dropped() == 0 {
		h.Record(row)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Record(row)
		}
	})
	b.ReportMetric(float64(h.Dropped())/float64(b.N), "dropped/op")
}

// latencyStore takes the same (fake) time for every write whatever its
// rows: a database whose COPY waits for its turn on a busy machine.
type latencyStore struct {
	blockedStore
	each    time.Duration
	largest int
	n       int
}

func (s *latencyStore) write(rows []Row) error {
	time.Sleep(s.each) // the write's length, in the bubble's clock
	s.n += len(rows)
	s.largest = max(s.largest, len(rows))
	return nil
}

// A PostgreSQL store's batch is the whole queue: at 20,000 rows a second
// into a store that takes 300 ms a write, a writer held to maxBatch rows
// a write falls behind by 1,900 rows a write and overflows the queue in
// seconds, one that takes what waited keeps up and drops nothing.
// Mutation check: options{batch: maxBatch} for the PostgreSQL store
// drops rows here (the second subtest shows it).
func TestSlowWritesCatchUpWithTheQueue(t *testing.T) {
	for _, c := range []struct {
		batch int
		drops bool
	}{{pgMaxBatch, false}, {maxBatch, true}} {
		t.Run(fmt.Sprintf("batch=%d", c.batch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &latencyStore{each: 300 * time.Millisecond}
				h := startWith(st, config.Default().History, zap.NewNop(), time.Now, options{batch: c.batch, noBudget: true})
				const perMs, ms = 20, 10_000 // 20,000 rows/s for 10 s
				for range ms {
					for range perMs {
						h.Record(Row{QName: "x."})
					}
					time.Sleep(time.Millisecond)
				}
				h.Sync()
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d rows written, %d dropped, the largest batch %d", h.Rows(), h.Dropped(), st.largest)
				if h.Rows()+h.Dropped() != perMs*ms || h.Rows() != uint64(st.n) {
					t.Fatalf("rows %d + dropped %d, want %d; the store has %d", h.Rows(), h.Dropped(), perMs*ms, st.n)
				}
				if st.largest > c.batch {
					t.Errorf("a batch of %d rows, bound %d", st.largest, c.batch)
				}
				if got := h.Dropped() > 0; got != c.drops {
					t.Errorf("%d rows dropped, want drops %v", h.Dropped(), c.drops)
				}
			})
		})
	}
}
