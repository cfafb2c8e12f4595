package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Limits of one pipelined DoT connection.
const (
	// maxAbandoned bounds the wire IDs a connection keeps reserved for
	// answers nobody awaits any more (cancelled exchanges). Past it the
	// server is evidently not answering them, and the connection retires.
	maxAbandoned = 256

	// dotWriteTimeout bounds a write when the exchange has no deadline: a
	// connection that cannot take one small frame for this long is stuck.
	dotWriteTimeout = 5 * time.Second
)

// dotConn is one DoT connection and the exchanges pipelined on it. Its
// reader goroutine owns the reading side, its writer goroutine the writing
// side: exchanges queue their frames for the writer, which sends all that
// are queued in one write, one TLS record, one system call.
type dotConn struct {
	t     *TLS
	ready chan struct{} // closed when the dial ended, conn or err set
	conn  *tls.Conn     // set before ready closes; nil when the dial failed
	err   error         // the dial's error, set before ready closes
	done  chan struct{} // closed when the reader has ended, or the dial failed
	wake  chan struct{} // capacity 1: frames are queued for the writer

	wmu    sync.Mutex // guards following
	queued []byte     // frames for the writer, back to back
	werr   error      // the write that failed; nothing is queued after it
	writes uint64     // batches the writer has taken, each sent in one write (tests read it)

	// Guarded by t.mu:
	waiters   map[uint16]*dotWait // wire IDs in flight; nil: abandoned, the answer is dropped
	abandoned int                 // nil entries in waiters
	armed     time.Time           // the read deadline set on conn: the earliest deadline of its waits or their next poll; zero: none
	inflight  int                 // exchanges holding the connection, waiting for it included
	retired   bool                // handed to no new exchange; closed when inflight drops to 0
	dead      bool                // the dial or the reader failed; failure says why
	failure   dotReply            // for exchanges that come after the reader failed
	idleSince time.Time           // when inflight last dropped to 0
}

// dotReply is what the reader hands an exchange: its answer, or why the
// connection failed, or that the exchange's deadline or context ended.
type dotReply struct {
	raw   []byte // the answer, in a buffer from getBuf that its receiver gives back
	err   error
	stale bool // the server closed the connection before any byte of an answer
	ended bool // err is the exchange's context's: the reader gave up waiting for it (see expire)
}

// dotWait is one exchange waiting on a connection. The reader, or fail, or
// expire, sends on ch once, having taken the wait out of waiters under t.mu.
type dotWait struct {
	ch       chan dotReply   // capacity 1: the sender never blocks
	ctx      context.Context // the exchange's, polled by the reader for cancellation (see expire)
	deadline time.Time       // when the reader ends the wait; zero for none
}

func newDotConn(t *TLS) *dotConn {
	return &dotConn{
		t:       t,
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
		waiters: make(map[uint16]*dotWait),
	}
}

// exchange sends frame (a query packed behind its length, the ID to be
// set) on c, which the caller holds, waits for the answer and releases c.
// It returns the answer's bytes as they came, with the wire ID they must
// carry, for the caller to decode. stale reports that the connection failed
// before any byte of an answer arrived, which earns a connection that was
// up before the exchange a redial.
func (c *dotConn) exchange(ctx context.Context, deadline time.Time, frame []byte) (raw []byte, id uint16, stale bool, err error) {
	t := c.t
	w := t.getWait()
	w.ctx, w.deadline = ctx, deadline
	t.mu.Lock()
	if c.dead {
		f := c.failure
		t.mu.Unlock()
		t.putWait(w)
		t.release(c, false)
		return nil, 0, f.stale, f.err
	}
	id = c.newIDLocked()
	c.waiters[id] = w
	if wake, sooner := wakeFor(c.armed, w.deadline); sooner {
		c.arm(wake)
	}
	t.mu.Unlock()

	binary.BigEndian.PutUint16(frame[2:], id)
	if err := c.write(ctx, frame); err != nil {
		// Not queued: the context ended, or the writer failed (and closed
		// c, whose reader fails the other exchanges).
		t.mu.Lock()
		mine := c.waiters[id] == w
		if mine {
			delete(c.waiters, id) // nothing answers it: no ID to reserve
		}
		t.mu.Unlock()
		if mine {
			t.putWait(w)
		}
		t.release(c, errors.Is(err, context.DeadlineExceeded))
		return nil, 0, isStale(err) || errors.Is(err, net.ErrClosed), ioError(ctx, "writing to", t.label, err)
	}

	// The reader hands w its answer, its connection's failure, or the end
	// of its deadline or context (see expire): one channel, no timer.
	rep := <-w.ch
	t.putWait(w)
	if rep.ended {
		// expire reserved the ID for the late answer.
		t.mu.Lock()
		retire := errors.Is(rep.err, context.DeadlineExceeded) || c.abandoned > maxAbandoned
		t.mu.Unlock()
		t.release(c, retire)
		return nil, 0, false, fmt.Errorf("reading from %s: %w", t.label, rep.err)
	}
	t.release(c, false)
	if rep.err != nil {
		return nil, 0, rep.stale, rep.err
	}
	return rep.raw, id, false, nil
}

// arm has c's reader wake at d (zero: never) to look at its waits.
// The caller holds t.mu.
func (c *dotConn) arm(d time.Time) {
	c.armed = d
	// A read that times out leaves a TLS connection usable: crypto/tls
	// keeps what it had read of a record and does not make the timeout
	// sticky. It fails only on a closed connection, whose reader is ending.
	_ = c.conn.SetReadDeadline(d)
}

// expire is c's reader waking at the time it was armed for: every wait on
// c whose deadline has passed or whose context has ended gets that error,
// its ID kept reserved for the late answer, and the reader is armed again
// for the earliest deadline of the others or the next cancellation poll.
// Waits end at their deadline, as a timer of their own would end them, and
// notice a cancellation within cancelPoll.
func (c *dotConn) expire() {
	now := time.Now()
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	var next time.Time
	for id, w := range c.waiters {
		if w == nil {
			continue
		}
		if err := waitEnded(w.ctx, w.deadline, now); err != nil {
			c.waiters[id] = nil
			c.abandoned++
			w.ch <- dotReply{err: err, ended: true}
			continue
		}
		next = foldWake(next, now, w.deadline)
	}
	c.arm(next)
}

// getWait returns an empty wait for one exchange.
func (t *TLS) getWait() *dotWait {
	if w, ok := t.waits.Get().(*dotWait); ok {
		return w
	}
	return &dotWait{ch: make(chan dotReply, 1)}
}

// putWait keeps w, out of the reader's reach and its channel empty, for
// another exchange.
func (t *TLS) putWait(w *dotWait) {
	w.ctx, w.deadline = nil, time.Time{}
	t.waits.Put(w)
}

// newIDLocked returns a random wire ID no exchange on c is using or has
// abandoned. A connection holds at most a few thousand, so the first draw
// almost always succeeds.
func (c *dotConn) newIDLocked() uint16 {
	for {
		id := newWireID()
		if _, taken := c.waiters[id]; !taken {
			return id
		}
	}
}

// write queues frame for c's writer, or says why it did not: ctx had
// ended, or an earlier write failed. The writer sends
// it with the frames queued before and after it, whatever becomes of ctx:
// a frame cut short would corrupt the stream every exchange on c shares.
// When a write fails, the writer closes c, and the reader fails every
// exchange waiting on it.
func (c *dotConn) write(ctx context.Context, frame []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	if err := c.werr; err != nil {
		c.wmu.Unlock()
		return err
	}
	c.queued = append(c.queued, frame...)
	c.wmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the writer is due to look anyway
	}
	return nil
}

// writeLoop is c's writer goroutine: it sends what is queued, all of it in
// each write, until the reader ends or a write fails. While it writes,
// the next frames gather, so a busy connection carries many queries per
// TLS record and system call, and an idle one sends each at once. Each
// write is bounded by dotWriteTimeout: a connection that cannot take a
// batch of small frames for that long is stuck.
func (c *dotConn) writeLoop() {
	var batch []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		batch, c.queued = c.queued, batch[:0]
		if len(batch) > 0 {
			c.writes++
		}
		c.wmu.Unlock()
		if len(batch) == 0 {
			continue
		}
		_ = c.conn.SetWriteDeadline(time.Now().Add(dotWriteTimeout)) // fails only once closed; Write says so
		_, err := c.conn.Write(batch)
		c.wmu.Lock()
		if err != nil {
			c.werr = err
			c.queued = nil
		}
		c.wmu.Unlock()
		if err != nil {
			_ = c.conn.Close() // the reader fails every exchange on c
			return
		}
	}
}

// read is c's reader goroutine: it hands each answer to the exchange with
// its ID until the connection fails or is closed. An answer with an ID no
// exchange has, not even an abandoned one, is a server misbehaving; it
// fails the connection rather than guess.
func (c *dotConn) read() {
	defer close(c.done)
	t := c.t
	var prefix [2]byte
	for {
		if n, err := c.readFull(prefix[:]); err != nil {
			c.fail(err, n == 0)
			return
		}
		n := int(binary.BigEndian.Uint16(prefix[:]))
		raw := getBuf(n)[:n]
		if _, err := c.readFull(raw); err != nil {
			putBuf(raw)
			c.fail(err, false)
			return
		}
		if n < 2 {
			putBuf(raw)
			c.fail(fmt.Errorf("%w: a %d-byte frame", ErrMalformed, n), false)
			return
		}
		id := binary.BigEndian.Uint16(raw)
		t.mu.Lock()
		w, ok := c.waiters[id]
		if ok {
			delete(c.waiters, id)
			if w == nil {
				c.abandoned--
			}
		}
		t.mu.Unlock()
		if !ok {
			putBuf(raw)
			c.fail(fmt.Errorf("%w: an answer with ID %d, which no query on the connection has", ErrIDMismatch, id), false)
			return
		}
		if w != nil {
			w.ch <- dotReply{raw: raw}
		} else {
			putBuf(raw) // a late answer: nobody waits for it
		}
	}
}

// readFull reads len(b) bytes from c's connection, as io.ReadFull does,
// and expires waits each time the read deadline they armed passes.
func (c *dotConn) readFull(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.conn.Read(b[n:])
		n += m
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.expire()
		case errors.Is(err, io.EOF) && n > 0:
			return n, io.ErrUnexpectedEOF
		default:
			return n, err
		}
	}
	return n, nil
}

// fail ends c after its reader met err: c leaves the transport, is closed,
// and every exchange waiting on it gets the error. clean reports that no
// byte of an answer had arrived since the last whole one.
func (c *dotConn) fail(err error, clean bool) {
	t := c.t
	rep := dotReply{err: fmt.Errorf("reading from %s: %w", t.label, err), stale: clean && isStale(err)}
	t.mu.Lock()
	c.dead, c.failure = true, rep
	waiters := c.waiters
	c.waiters = nil
	t.removeLocked(c)
	delete(t.open, c)
	t.mu.Unlock()

	_ = c.conn.Close()
	for _, w := range waiters {
		if w != nil {
			w.ch <- rep
		}
	}
}
