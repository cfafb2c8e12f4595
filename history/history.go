package history

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/cputime"
)

// Sizes of the queue and the batches.
const (
	// QueueSize is how many rows wait for the writer at most: two seconds
	// of 20,000 queries a second, 3.5 MiB of queued rows. Past it rows
	// are dropped and counted.
	QueueSize = 1 << 15

	// maxBatch bounds one transaction, so that a burst is written in
	// several short ones and the readers see rows soon.
	maxBatch = 4096

	// pgMaxBatch bounds one batch of a PostgreSQL store: the whole queue.
	// A COPY's time there is mostly waiting (the server's turn for a core
	// on a busy machine, its disk), hardly its rows, so that a writer
	// that fell behind during a slow COPY catches up in the next one
	// rather than by maxBatch rows a COPY, each as slow, while the queue
	// overflows. SQLite's transactions stay short for its readers.
	pgMaxBatch = QueueSize

	// batchDelay is how long the writer lets rows gather after the first
	// of a batch: a transaction costs tens of µs of CPU whatever its size,
	// so at a steady 20,000 queries a second batches of a few rows cost
	// more than the rows. Rows reach the readers this much later at most.
	batchDelay = 100 * time.Millisecond

	// writerShare is the most of one core's CPU time the writer spends
	// reading the queue and writing batches (its thread's, on Linux),
	// with a burst of writerBurst: when the rows come faster than that
	// buys, the writer pauses, the queue fills, and rows are dropped and
	// counted rather than taken from the queries' CPU. At about 1 µs a
	// row (BenchmarkWriterSteady) it buys some 20,000 rows a second, the
	// burst what carries a second in which the writer falls behind. A
	// Sync or Close writes everything queued whatever the budget.
	writerShare = 0.03
	writerBurst = 30 * time.Millisecond
	maxPause    = time.Second

	// maintainEvery is how often retention runs: the spec's "at least
	// hourly", much more often, so each run has little to delete. The
	// size is checked after every batch.
	maintainEvery = 5 * time.Minute
)

// History is the query history: Record queues a row; one writer
// goroutine, started by Open and ended by Close, writes them. Its methods
// are safe for concurrent use.
type History struct {
	st        store
	log       *zap.Logger
	retention time.Duration
	maxBytes  int64
	now       func() time.Time

	queue    *ring         // Record's rows for the writer
	wake     chan struct{} // a token when rows were queued since the writer last took it
	batchMax int           // maxBatch, or pgMaxBatch for a PostgreSQL store
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the writer has flushed and ended
	once     sync.Once

	rows    atomic.Uint64 // written
	dropped atomic.Uint64 // dropped because a batch failed (a full queue counts in the ring's stripes)
	flushed atomic.Uint64 // batches written, for tests' Sync
	syncReq chan chan struct{}

	maintained chan bool // tests: told after each maintenance chunk whether more is left; nil in use
	down       chan int  // tests: told a batch's size when a write of it first finds the database unreachable; nil in use

	instance string // history.instance: this replica's rows
	shared   bool   // the store holds a fleet's rows, tagged with their instance

	// Backoff of a batch that waits for an unreachable database.
	retryMin, retryMax time.Duration

	share  float64              // writerShare; 0: no budget (benchmarks of the writer's own speed)
	busy   func() time.Duration // the writer's clock for its budget: its thread's CPU time
	budget budget               // owned by the writer goroutine
	// writeCPU is what the batches' writes took of the budget's clock, in
	// all (benchmarks: the writer's own CPU a row).
	writeCPU atomic.Int64

	// Owned by the writer goroutine.
	failed     int             // rows whose write failed since the last log line
	failLogged time.Time       // when a failure was last logged
	pending    bool            // the batch waits for the database (errRetry)
	wait       time.Duration   // the pending batch's next backoff
	waiting    []chan struct{} // Syncs waiting for the pending batch
	downLogged time.Time       // when the database was last said unreachable
}

// Backoff of writes to an unreachable database: the pool reconnects on
// the next try.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 10 * time.Second
)

// options are a History's knobs besides the configuration, for tests.
type options struct {
	queue              int // QueueSize when 0
	batch              int // the most rows a batch: maxBatch when 0
	retryMin, retryMax time.Duration
	noBudget           bool                 // the writer as fast as it can
	busy               func() time.Duration // threadCPU when nil
	maintained         chan bool
	down               chan int // told a batch's size when the database turns out unreachable for it
}

// Open opens the history cfg describes and starts its writer. A database
// file that opens but is not nxdnsd's history, or fails its integrity
// check, is renamed to PATH.damaged-UNIXTIME (logged at error level) and a
// new one is created. A file that cannot be opened (permissions, a lock)
// is left alone: the error wraps ErrUnavailable, and the caller logs it
// and runs without a history. Open is not to be called with cfg.Enabled
// false.
//
// With cfg.Postgres set the rows go to that PostgreSQL database instead
// (spec section 16), tagged with cfg.InstanceName(), and the API reads the
// fleet's. A database that cannot be reached at start is logged at warn
// level: rows wait in the queue and are written when it can be.
func Open(cfg config.History, logger *zap.Logger) (*History, error) {
	if cfg.Postgres != "" {
		st, warn, err := openPostgres(cfg.Postgres, cfg.InstanceName())
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, config.RedactPostgres(cfg.Postgres), err)
		}
		if warn != nil {
			logger.Warn("history: the PostgreSQL database is unreachable; rows wait for it",
				zap.String("postgres", config.RedactPostgres(cfg.Postgres)), zap.Error(warn))
		}
		return startWith(st, cfg, logger, time.Now, options{batch: pgMaxBatch}), nil
	}
	st, err := openSQLite(cfg.Path)
	if errors.Is(err, errDamaged) && cfg.Path != "" {
		aside := fmt.Sprintf("%s.damaged-%d", cfg.Path, time.Now().Unix())
		if rerr := renameAside(cfg.Path, aside); rerr != nil {
			return nil, fmt.Errorf("%w: %v; renaming it aside: %v", ErrUnavailable, err, rerr)
		}
		logger.Error("history database damaged: renamed aside, starting a new one",
			zap.String("path", cfg.Path), zap.String("renamed_to", aside), zap.Error(err))
		st, err = openSQLite(cfg.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("history: opening %q: %w", cfg.Path, err)
	}
	return start(st, cfg, logger, time.Now), nil
}

// renameAside moves a damaged database and its write-ahead log and shared
// memory files out of the way.
func renameAside(path, aside string) error {
	if err := os.Rename(path, aside); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func start(st store, cfg config.History, logger *zap.Logger, now func() time.Time) *History {
	return startHooked(st, cfg, logger, now, nil)
}

func startHooked(st store, cfg config.History, logger *zap.Logger, now func() time.Time, maintained chan bool) *History {
	return startWith(st, cfg, logger, now, options{maintained: maintained})
}

func startWith(st store, cfg config.History, logger *zap.Logger, now func() time.Time, o options) *History {
	if o.queue == 0 {
		o.queue = QueueSize
	}
	if o.batch == 0 {
		o.batch = maxBatch
	}
	if o.retryMin == 0 {
		o.retryMin, o.retryMax = retryMin, retryMax
	}
	_, shared := st.(*pgStore)
	h := &History{
		st:        st,
		log:       logger,
		retention: cfg.Retention(),
		maxBytes:  cfg.MaxBytes(),
		now:       now,
		queue:     newRing(o.queue),
		wake:      make(chan struct{}, 1),
		batchMax:  o.batch,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		syncReq:   make(chan chan struct{}),

		maintained: o.maintained,
		down:       o.down,
		instance:   cfg.InstanceName(),
		shared:     shared,
		retryMin:   o.retryMin,
		retryMax:   o.retryMax,
		wait:       o.retryMin,
		share:      writerShare,
	}
	if o.noBudget {
		h.share = 0
	}
	h.busy = o.busy
	if h.busy == nil {
		h.busy = threadCPU
	}
	h.budget.at = time.Now()
	go h.run()
	return h
}

// Record queues one row for the writer. It never waits: when the queue is
// full the row is dropped and counted (nxdns_history_dropped_total). After
// Close every row is dropped. It allocates nothing.
func (h *History) Record(row Row) {
	select {
	case <-h.stop:
		h.queue.drop()
		return
	default:
	}
	// A Close that comes between the check and the push has sealed the
	// queue: the push fails and the row is counted as dropped.
	if !h.queue.push(&row) {
		h.queue.drop()
		return
	}
	// Wake the writer. With a token already waiting (the writer gathers
	// for batchDelay after it takes one) this only reads the channel.
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Close writes what is queued, stops the writer and closes the database.
// Calls after the first return nil.
func (h *History) Close() error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		// A row queued while the writer ended, or by a Record that
		// passed the stop check before it, is not lost uncounted.
		h.queue.seal()
		h.queue.discard()
		err = h.st.close()
	})
	return err
}

// Rows is how many rows were written (nxdns_history_rows_total).
func (h *History) Rows() uint64 { return h.rows.Load() }

// Dropped is how many rows were dropped (nxdns_history_dropped_total):
// the queue was full, or writing their batch failed.
func (h *History) Dropped() uint64 { return h.dropped.Load() + h.queue.dropped() }

// Bytes is the database's size (nxdns_history_bytes), as last measured by
// the writer.
func (h *History) Bytes() int64 { return h.st.size() }

// run is the writer: it owns the store's write side. Each batch is what
// the queue holds, up to batchMax, in one transaction. Maintenance runs a
// chunk at a time; between chunks, rows waiting come first.
func (h *History) run() {
	defer close(h.done)
	// One thread, so that its CPU time is the writer's (the budget).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	batch := make([]Row, 0, maxBatch) // grows to batchMax when a PostgreSQL store is behind
	tick := time.NewTicker(maintainEvery)
	defer tick.Stop()
	maintain := true // at start: a database that was closed for a while has old rows
	for {
		if h.pending {
			var ok bool
			if batch, ok = h.retry(batch); !ok {
				return
			}
			continue
		}
		if maintain {
			maintain = h.maintain()
			if h.maintained != nil {
				h.maintained <- maintain
			}
		}
		// With maintenance left, the rows waiting come first, then the
		// next chunk (wait is then always ready); without, the writer
		// waits for rows or the tick.
		wait := tick.C
		if maintain {
			if h.queue.len() > 0 {
				var m bool
				batch, m = h.take(batch)
				maintain = m || maintain
				continue
			}
			wait = ready
		}
		select {
		case <-h.wake:
			var m bool
			batch, m = h.take(batch)
			maintain = m || maintain
		case <-wait:
			maintain = true
		case ack := <-h.syncReq:
			batch = h.synced(batch, ack)
		case <-h.stop:
			h.stopped(batch)
			return
		}
	}
}

// ready is a channel that is always ready: a select on it does not wait.
var ready = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// take writes a batch of what the queue holds and what follows it
// within batchDelay (gather), in batch's memory, and answers a Sync that
// came meanwhile. It returns the batch, which waits for the database
// when that is down (h.pending), and whether maintenance is due. The
// budget counts the batch's reads from the queue with its write.
func (h *History) take(batch []Row) ([]Row, bool) {
	batch, ack, spent := h.gather(batch[:0])
	if len(batch) == 0 { // the rows that woke the writer were taken by the batch before
		if ack != nil {
			batch = h.synced(batch, ack)
		}
		return batch, false
	}
	start := h.busy()
	maintain := h.write(batch)
	written := h.busy() - start
	h.writeCPU.Add(int64(written))
	spent += written
	if ack == nil && !h.pending && h.share > 0 {
		ack = h.pause(h.budget.spend(spent, time.Now(), h.share))
	}
	switch {
	case ack == nil:
	case h.pending: // the database is down: the ack waits for the batch's retry
		h.waiting = append(h.waiting, ack)
	default:
		batch = h.synced(batch, ack)
	}
	return batch, maintain
}

// threadCPU is the writer thread's CPU time (the goroutine is locked to
// its thread), what its budget counts, so that the time it waits for a
// core on a busy machine is not charged to it; the wall clock where the
// system does not tell it.
func threadCPU() time.Duration {
	if d, ok := cputime.Thread(); ok {
		return d
	}
	return wallClock()
}

// wallClock is a monotonic clock as a duration.
func wallClock() time.Duration { return time.Since(clockStart) }

var clockStart = time.Now()

// budget is the writer's time: a bucket that fills at share of the
// clock, up to writerBurst, and that each batch's write empties by its
// length.
type budget struct {
	left time.Duration
	at   time.Time
}

// spend takes d from the budget at now and returns how long the writer
// is to pause for the budget to be back at zero.
func (b *budget) spend(d time.Duration, now time.Time, share float64) time.Duration {
	b.left = min(writerBurst, b.left+time.Duration(float64(now.Sub(b.at))*share))
	b.at = now
	b.left -= d
	if b.left >= 0 {
		return 0
	}
	return min(maxPause, time.Duration(float64(-b.left)/share))
}

// pause waits d (the writer's budget is spent: rows wait in the queue,
// and past it are dropped and counted), or less when the History is
// closed or a Sync comes, whose ack it returns.
func (h *History) pause(d time.Duration) chan struct{} {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.stop:
	case ack := <-h.syncReq:
		return ack
	}
	return nil
}

// flush writes everything queued, using batch's memory. When the
// database cannot be reached it returns the batch that waits for it
// (h.pending), else an empty one.
func (h *History) flush(batch []Row) []Row {
	for {
		batch = h.drain(batch[:0])
		if len(batch) == 0 {
			return batch
		}
		h.write(batch)
		if h.pending {
			return batch
		}
	}
}

// synced answers a Sync: at once when everything queued is written,
// after the pending batch and the queue are when the database is
// unreachable.
func (h *History) synced(batch []Row, ack chan struct{}) []Row {
	batch = h.flush(batch)
	if h.pending {
		h.waiting = append(h.waiting, ack)
	} else {
		close(ack)
	}
	return batch
}

// stopped writes what is queued at Close; a batch the unreachable
// database could not take is dropped and counted (Close counts the
// queue's rest).
func (h *History) stopped(batch []Row) {
	if !h.pending {
		batch = h.flush(batch)
	}
	if h.pending {
		h.dropped.Add(uint64(len(batch)))
		h.pending = false
	}
	for _, ack := range h.waiting {
		close(ack)
	}
	h.waiting = nil
}

// retry waits the backoff and writes the pending batch again. Meanwhile
// the queue fills, and past it Record drops and counts. It reports false
// when the History was closed.
func (h *History) retry(batch []Row) ([]Row, bool) {
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case <-t.C:
	case ack := <-h.syncReq:
		h.waiting = append(h.waiting, ack)
		return batch, true
	case <-h.stop:
		h.write(batch) // once more, for a database that just came back
		h.stopped(batch)
		return batch, false
	}
	h.write(batch)
	if h.pending {
		return batch, true
	}
	batch = h.flush(batch)
	if !h.pending {
		// After the queue's rows: what waited is written.
		h.log.Info("history: the database is reachable again; writing resumed", zap.Uint64("dropped", h.dropped.Load()))
		for _, ack := range h.waiting {
			close(ack)
		}
		h.waiting = nil
	}
	return batch, true
}

// gather appends what the queue holds to batch and, unless that makes a
// full batch, what arrives within batchDelay. A Sync or Close ends the
// wait at once; a Sync's ack is returned, for after the batch and the
// rest of the queue are written. spent is what the reads took of the
// budget's clock (the wait is not the writer's CPU).
func (h *History) gather(batch []Row) (_ []Row, ack chan struct{}, spent time.Duration) {
	start := h.busy()
	batch = h.drain(batch)
	spent = h.busy() - start
	if len(batch) >= h.batchMax {
		return batch, nil, spent
	}
	// Sleep rather than take the rows one by one: one wake-up a batch.
	t := time.NewTimer(batchDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case ack = <-h.syncReq:
	case <-h.stop:
	}
	start = h.busy()
	batch = h.drain(batch)
	return batch, ack, spent + h.busy() - start
}

// drain appends what the queue holds to batch, up to batchMax.
func (h *History) drain(batch []Row) []Row {
	var q queued
	for len(batch) < h.batchMax && h.queue.pop(&q) {
		batch = append(batch, q.row())
	}
	return batch
}

// write writes one batch and reports whether the database is past its
// size bound, so that maintenance runs.
func (h *History) write(batch []Row) bool {
	err := h.st.write(batch)
	if errors.Is(err, errRetry) {
		// Kept, not dropped: the queue is the buffer of an outage.
		if h.pending {
			h.wait = min(2*h.wait, h.retryMax)
		} else {
			h.pending, h.wait = true, h.retryMin
			if h.down != nil {
				h.down <- len(batch)
			}
		}
		if now := h.now(); now.Sub(h.downLogged) >= time.Minute {
			h.log.Error("history: the database is unreachable; rows wait in the queue, then are dropped and counted",
				zap.Int("waiting", len(batch)+h.queue.len()), zap.Error(err))
			h.downLogged = now
		}
		return false
	}
	h.pending = false
	if err != nil {
		h.dropped.Add(uint64(len(batch)))
		// A full disk fails every batch: said once a minute, with the
		// count since.
		h.failed += len(batch)
		if now := h.now(); now.Sub(h.failLogged) >= time.Minute {
			h.log.Error("history: writing rows failed; they are dropped", zap.Int("rows", h.failed), zap.Error(err))
			h.failed, h.failLogged = 0, now
		}
	} else {
		h.rows.Add(uint64(len(batch)))
	}
	h.flushed.Add(1)
	clear(batch) // let the strings go
	return h.st.used() > int64(float64(h.maxBytes)*highWater)
}

// maintain runs one chunk of retention and reports whether more is left.
func (h *History) maintain() bool {
	more, err := h.st.maintain(h.now().Add(-h.retention), h.maxBytes)
	if err != nil {
		h.log.Error("history: retention failed", zap.Error(err))
		return false
	}
	return more
}

// Sync waits until every row recorded before it was called is written.
// For tests and benchmarks.
func (h *History) Sync() {
	ack := make(chan struct{})
	select {
	case h.syncReq <- ack:
		<-ack
	case <-h.done:
	}
}
