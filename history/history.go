package history

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
)

// Sizes of the queue and the batches.
const (
	// QueueSize is how many rows wait for the writer at most: two seconds
	// of 20,000 queries a second, about 3 MiB of Row values. Past it rows
	// are dropped and counted.
	QueueSize = 1 << 15

	// maxBatch bounds one transaction, so that a burst is written in
	// several short ones and the readers see rows soon.
	maxBatch = 4096

	// batchDelay is how long the writer lets rows gather after the first
	// of a batch: a transaction costs tens of µs of CPU whatever its size,
	// so at a steady 20,000 queries a second batches of a few rows cost
	// more than the rows. Rows reach the readers this much later at most.
	batchDelay = 100 * time.Millisecond

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

	queue chan Row
	stop  chan struct{} // closed by Close
	done  chan struct{} // closed when the writer has flushed and ended
	once  sync.Once

	rows    atomic.Uint64 // written
	dropped atomic.Uint64 // dropped: the queue was full, or a batch failed
	flushed atomic.Uint64 // batches written, for tests' Sync
	syncReq chan chan struct{}

	maintained chan bool // tests: told after each maintenance chunk whether more is left; nil in use

	// Owned by the writer goroutine.
	failed     int       // rows whose write failed since the last log line
	failLogged time.Time // when a failure was last logged
}

// Open opens the history cfg describes and starts its writer. A database
// file that opens but is not nxdnsd's history, or fails its integrity
// check, is renamed to PATH.damaged-UNIXTIME (logged at error level) and a
// new one is created. A file that cannot be opened (permissions, a lock)
// is left alone: the error wraps ErrUnavailable, and the caller logs it
// and runs without a history. Open is not to be called with cfg.Enabled
// false.
func Open(cfg config.History, logger *zap.Logger) (*History, error) {
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
	h := &History{
		st:        st,
		log:       logger,
		retention: cfg.Retention(),
		maxBytes:  cfg.MaxBytes(),
		now:       now,
		queue:     make(chan Row, QueueSize),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		syncReq:   make(chan chan struct{}),

		maintained: maintained,
	}
	go h.run()
	return h
}

// Record queues one row for the writer. It never waits: when the queue is
// full the row is dropped and counted (nxdns_history_dropped_total). After
// Close every row is dropped. It allocates nothing.
func (h *History) Record(row Row) {
	select {
	case <-h.stop:
		h.dropped.Add(1)
		return
	default:
	}
	select {
	case h.queue <- row:
	default:
		h.dropped.Add(1)
	}
}

// Close writes what is queued, stops the writer and closes the database.
// Calls after the first return nil.
func (h *History) Close() error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		// A row sent while the writer ended is not lost uncounted.
		for {
			select {
			case <-h.queue:
				h.dropped.Add(1)
				continue
			default:
			}
			break
		}
		err = h.st.close()
	})
	return err
}

// Rows is how many rows were written (nxdns_history_rows_total).
func (h *History) Rows() uint64 { return h.rows.Load() }

// Dropped is how many rows were dropped (nxdns_history_dropped_total):
// the queue was full, or writing their batch failed.
func (h *History) Dropped() uint64 { return h.dropped.Load() }

// Bytes is the database's size (nxdns_history_bytes), as last measured by
// the writer.
func (h *History) Bytes() int64 { return h.st.size() }

// run is the writer: it owns the store's write side. Each batch is what
// the queue holds, up to maxBatch, in one transaction. Maintenance runs a
// chunk at a time; between chunks, rows waiting come first.
func (h *History) run() {
	defer close(h.done)
	batch := make([]Row, 0, maxBatch)
	tick := time.NewTicker(maintainEvery)
	defer tick.Stop()
	maintain := true // at start: a database that was closed for a while has old rows
	for {
		if maintain {
			maintain = h.maintain()
			if h.maintained != nil {
				h.maintained <- maintain
			}
		}
		var wait <-chan time.Time
		if !maintain {
			wait = tick.C
		}
		select {
		case r := <-h.queue:
			batch, ack := h.gather(append(batch[:0], r))
			maintain = h.write(batch) || maintain
			if ack != nil {
				h.flush(batch)
				close(ack)
			}
		case <-wait:
			maintain = true
		case ack := <-h.syncReq:
			h.flush(batch)
			close(ack)
		case <-h.stop:
			h.flush(batch)
			return
		default:
			if !maintain {
				// Nothing to do: wait for rows or the tick.
				select {
				case r := <-h.queue:
					batch, ack := h.gather(append(batch[:0], r))
					maintain = h.write(batch)
					if ack != nil {
						h.flush(batch)
						close(ack)
					}
				case <-wait:
					maintain = true
				case ack := <-h.syncReq:
					h.flush(batch)
					close(ack)
				case <-h.stop:
					h.flush(batch)
					return
				}
			}
		}
	}
}

// flush writes everything queued, using batch's memory.
func (h *History) flush(batch []Row) {
	for {
		batch = h.drain(batch[:0])
		if len(batch) == 0 {
			return
		}
		h.write(batch)
	}
}

// gather appends what the queue holds to batch and, unless that makes a
// full batch, what arrives within batchDelay. A Sync or Close ends the
// wait at once; a Sync's ack is returned, for after the batch and the
// rest of the queue are written.
func (h *History) gather(batch []Row) ([]Row, chan struct{}) {
	batch = h.drain(batch)
	if len(batch) >= maxBatch {
		return batch, nil
	}
	// Sleep rather than take the rows one by one: one wake-up a batch.
	t := time.NewTimer(batchDelay)
	defer t.Stop()
	var ack chan struct{}
	select {
	case <-t.C:
	case ack = <-h.syncReq:
	case <-h.stop:
	}
	return h.drain(batch), ack
}

// drain appends what the queue holds to batch, up to maxBatch.
func (h *History) drain(batch []Row) []Row {
	for len(batch) < maxBatch {
		select {
		case r := <-h.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// write writes one batch and reports whether the database is past its
// size bound, so that maintenance runs.
func (h *History) write(batch []Row) bool {
	if err := h.st.write(batch); err != nil {
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
