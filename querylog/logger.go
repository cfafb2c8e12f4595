// Package querylog writes nxdnsd's query log (spec section 6): one JSON
// object per answered query, to a file, stdout or any writer.
//
// Writing is off the query path. A query encodes its line into one of a
// fixed number of buffers and hands it to a single writer goroutine; when
// every buffer is taken — the disk is slow, full or stalled — the line is
// dropped and Log reports it, so a query never waits for the disk. The
// memory the log can hold is bounded by that number of buffers.
//
// A line goes to a file whole or not at all. When a write fails part way
// (a full disk), the lines it wrote whole stay, the line it cut is taken
// back (the file is truncated to the end of the last whole line), and the
// lines lost, the cut one included, are reported to Options.Dropped. To a
// writer that cannot take bytes back (a pipe, stdout) the cut line stays
// as it is, and the next line starts on a fresh one.
package querylog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/query"
)

// DefaultBuffer is how many lines may wait for the writer before lines are
// dropped: about a second of a busy home network's queries, and at most a
// few megabytes of memory.
const DefaultBuffer = 4096

// Stdout is the path that writes the log to standard output.
const Stdout = "-"

// FileMode is the permission of a query-log file nxdnsd creates. The log
// names every client and what it asked, so it is not world-readable.
const FileMode os.FileMode = 0o640

const (
	// batchSize is how much the writer gathers before one write: a busy
	// log costs one system call per batch, not per line.
	batchSize = 64 << 10

	// maxLineCap is the largest buffer kept for reuse. A line with a long
	// attempt trail may grow its buffer; a rare giant is not kept forever.
	maxLineCap = 16 << 10
)

// ErrClosed is returned by Reopen after Close.
var ErrClosed = errors.New("querylog: closed")

// Options configure a Logger.
type Options struct {
	// Encoder chooses the trail and names the upstreams.
	Encoder Encoder

	// Buffer is the number of lines that may wait for the writer; zero
	// means DefaultBuffer.
	Buffer int

	// Logger receives write and reopen errors, or nil for none.
	Logger *zap.Logger

	// Dropped, or nil, hears of lines accepted by Log and then lost
	// because a write failed: how many, on the writer goroutine (the
	// nxdns_query_log_dropped_total counter, with Log's own drops).
	Dropped func(lines int)
}

// Logger is an asynchronous, bounded query-log writer. Log is safe for
// concurrent use; Sync, Reopen and Close may be called from any goroutine.
type Logger struct {
	enc  Encoder
	path string // the file to reopen; "" when the writer is not a file Open made
	log  *zap.Logger

	free  chan *line // buffers a query may take; capacity Buffer
	queue chan *line // lines waiting for the writer; capacity Buffer, so a send never blocks
	ctl   chan control
	done  chan struct{} // closed when the writer goroutine has returned

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	dropped func(lines int) // or nil

	// Owned by the writer goroutine.
	out     io.Writer
	file    *os.File // out when Open made it, else nil
	batch   []byte
	failing bool // the last write failed; logged once per streak
	torn    bool // out ends in part of a line that could not be taken back
}

// line is one encoded line on its way to the writer.
type line struct{ b []byte }

type controlOp uint8

const (
	opSync controlOp = iota
	opReopen
	opClose
)

type control struct {
	op    controlOp
	reply chan error
}

// Open starts a Logger writing to path: Stdout ("-") for standard output,
// else a file opened for appending and created (FileMode) if missing.
// Reopen opens the same path again.
func Open(path string, o Options) (*Logger, error) {
	if path == "" {
		return nil, errors.New("querylog: no path")
	}
	if path == Stdout {
		return New(os.Stdout, o), nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := newLogger(f, o)
	l.path, l.file = path, f
	go l.run()
	return l, nil
}

// New starts a Logger writing to w. Close does not close w, and Reopen
// does nothing.
func New(w io.Writer, o Options) *Logger {
	l := newLogger(w, o)
	go l.run()
	return l
}

func newLogger(w io.Writer, o Options) *Logger {
	n := o.Buffer
	if n <= 0 {
		n = DefaultBuffer
	}
	l := &Logger{
		enc:     o.Encoder,
		log:     o.Logger,
		dropped: o.Dropped,
		free:    make(chan *line, n),
		queue:   make(chan *line, n),
		ctl:     make(chan control),
		done:    make(chan struct{}),
		out:     w,
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	for range n {
		l.free <- new(line)
	}
	return l
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("opening the query log: %w", err)
	}
	return f, nil
}

// Log queues e's line for the writer and reports whether it was accepted.
// It never waits: false means every buffer is taken (the writer has fallen
// behind) or the Logger is closed, and the line is dropped; the caller
// counts it. e is read only during the call.
func (l *Logger) Log(e *query.Entry) bool {
	if l.closed.Load() {
		return false
	}
	var ln *line
	select {
	case ln = <-l.free:
	default:
		return false
	}
	ln.b = l.enc.Append(ln.b[:0], e)
	// Never blocks: queue holds as many lines as there are buffers.
	l.queue <- ln
	return true
}

// Sync returns once every line accepted before the call has been handed
// to the underlying writer (a file's data then is in the kernel, not
// necessarily on the disk).
func (l *Logger) Sync() { _ = l.control(opSync) }

// Reopen closes the log file and opens its path again, so that a file
// renamed by logrotate is let go of and a new one is started; send the
// process SIGUSR1 after rotating. Every line accepted before the call goes
// to the old file. If the path cannot be opened, the old file is kept and
// the error returned. It does nothing for stdout or a writer given to New.
func (l *Logger) Reopen() error {
	if l.path == "" {
		return nil
	}
	return l.control(opReopen)
}

// Close writes every accepted line, closes the file (never stdout or a
// writer given to New) and stops the writer goroutine. Call it once no
// query logs any more (the daemon does after its listeners have stopped):
// lines logged after Close are dropped, and one logged while Close runs
// may be lost. It returns the error of closing the file; later calls
// return the same.
func (l *Logger) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.closeErr = l.control(opClose)
		<-l.done
	})
	return l.closeErr
}

// control asks the writer goroutine to drain the queue and then do op.
func (l *Logger) control(op controlOp) error {
	c := control{op: op, reply: make(chan error, 1)}
	select {
	case l.ctl <- c:
	case <-l.done:
		return ErrClosed
	}
	return <-c.reply
}

// run is the writer goroutine: it owns out, file and batch.
func (l *Logger) run() {
	defer close(l.done)
	for {
		select {
		case ln := <-l.queue:
			l.write(ln)
			if len(l.queue) == 0 {
				l.flush() // caught up: let readers (tail -f) see the lines now
			}
		case c := <-l.ctl:
			l.drain()
			l.flush()
			switch c.op {
			case opSync:
				c.reply <- nil
			case opReopen:
				c.reply <- l.reopen()
			case opClose:
				var err error
				if l.file != nil {
					err = l.file.Close()
				}
				c.reply <- err
				return
			}
		}
	}
}

// drain writes every line already queued.
func (l *Logger) drain() {
	for {
		select {
		case ln := <-l.queue:
			l.write(ln)
		default:
			return
		}
	}
}

// write adds a line to the batch and gives its buffer back to the queries.
func (l *Logger) write(ln *line) {
	l.batch = append(l.batch, ln.b...)
	if cap(ln.b) > maxLineCap {
		ln.b = nil
	}
	l.free <- ln // never blocks: free holds every buffer
	if len(l.batch) >= batchSize {
		l.flush()
	}
}

// flush writes the batch. A failed write loses the lines it did not write
// whole (see lose): retrying would stall the log behind a disk that may
// never recover, and the queries' own lines keep coming. The error is
// logged once per streak of failures.
func (l *Logger) flush() {
	if len(l.batch) == 0 {
		return
	}
	var n int
	var err error
	if l.torn {
		// The last write ended inside a line: start a fresh one, so that
		// the cut line is the only one lost.
		if _, err = l.out.Write(newline); err == nil {
			l.torn = false
		}
	}
	if err == nil {
		n, err = l.out.Write(l.batch)
		if err == nil && n < len(l.batch) {
			err = io.ErrShortWrite
		}
	}
	lost := 0
	if err != nil {
		lost = l.lose(n)
	}
	l.batch = l.batch[:0]
	if cap(l.batch) > 4*batchSize {
		l.batch = nil
	}
	switch {
	case err != nil && !l.failing:
		l.failing = true
		l.log.Error("writing the query log; lines are lost until a write succeeds",
			zap.String("path", l.path), zap.Int("lines_lost", lost), zap.Error(err))
	case err == nil && l.failing:
		l.failing = false
		l.log.Info("writing the query log again", zap.String("path", l.path))
	}
}

var newline = []byte{'\n'}

// lose accounts for a write of the batch that failed after n bytes: the
// lines written whole stay; a line cut short is taken back from a file
// (truncated to the end of the last whole line) or, when that fails or the
// writer is no file, leaves the log torn, so that the next write starts a
// fresh line. It reports the lines lost to Options.Dropped and returns
// their number.
func (l *Logger) lose(n int) int {
	n = min(max(n, 0), len(l.batch))
	whole := bytes.LastIndexByte(l.batch[:n], '\n') + 1 // every line ends in one: JSON escapes the others
	lost := bytes.Count(l.batch[whole:], newline)
	if cut := n - whole; cut > 0 && !l.takeBack(cut) {
		l.torn = true
	}
	if lost > 0 && l.dropped != nil {
		l.dropped(lost)
	}
	return lost
}

// takeBack removes the last cut bytes written to the file, a line cut
// short, and reports whether it could. Opened for appending, the file's
// offset is the end of what the failed write wrote.
func (l *Logger) takeBack(cut int) bool {
	if l.file == nil {
		return false
	}
	end, err := l.file.Seek(0, io.SeekCurrent)
	if err != nil || end < int64(cut) {
		return false
	}
	if err := l.file.Truncate(end - int64(cut)); err != nil {
		l.log.Warn("taking a cut line back from the query log", zap.String("path", l.path), zap.Error(err))
		return false
	}
	return true
}

func (l *Logger) reopen() error {
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	old := l.file
	l.file, l.out = f, f
	l.failing = false // torn stays: the path may be the same file
	if err := old.Close(); err != nil {
		l.log.Warn("closing the rotated query log", zap.String("path", l.path), zap.Error(err))
	}
	return nil
}
