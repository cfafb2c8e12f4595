package wire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/miekg/dns"
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
// reader goroutine owns the reading side; writes take turns on wsem.
type dotConn struct {
	t     *TLS
	ready chan struct{} // closed when the dial ended, conn or err set
	conn  *tls.Conn     // set before ready closes; nil when the dial failed
	err   error         // the dial's error, set before ready closes
	done  chan struct{} // closed when the reader has ended, or the dial failed
	wsem  chan struct{} // one token, held while a frame is written: frames never interleave

	// Guarded by t.mu:
	waiters   map[uint16]chan dotReply // wire IDs in flight; nil: abandoned, the answer is dropped
	abandoned int                      // nil entries in waiters
	inflight  int                      // exchanges holding the connection, waiting for it included
	retired   bool                     // handed to no new exchange; closed when inflight drops to 0
	dead      bool                     // the dial or the reader failed; failure says why
	failure   dotReply                 // for exchanges that come after the reader failed
	idleSince time.Time                // when inflight last dropped to 0
}

// dotReply is what the reader hands an exchange: its answer, or why the
// connection failed.
type dotReply struct {
	raw   []byte // the answer, in a buffer from getBuf that its receiver gives back
	err   error
	stale bool // the server closed the connection before any byte of an answer
}

func newDotConn(t *TLS) *dotConn {
	return &dotConn{
		t:       t,
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		wsem:    make(chan struct{}, 1),
		waiters: make(map[uint16]chan dotReply),
	}
}

// exchange sends frame (a query packed behind its length, the ID to be
// set) on c, which the caller holds, waits for the answer and releases c.
// It returns the answer's bytes as they came, with the wire ID they must
// carry, for the caller to decode. stale reports that the connection failed
// before any byte of an answer arrived, which earns a connection that was
// up before the exchange a redial.
func (c *dotConn) exchange(ctx context.Context, frame []byte) (raw []byte, id uint16, stale bool, err error) {
	t := c.t
	ch := t.reply() // capacity 1: the reader never blocks on an exchange
	t.mu.Lock()
	if c.dead {
		f := c.failure
		t.mu.Unlock()
		t.putReply(ch)
		t.release(c, false)
		return nil, 0, f.stale, f.err
	}
	id = c.newIDLocked()
	c.waiters[id] = ch
	t.mu.Unlock()

	binary.BigEndian.PutUint16(frame[2:], id)
	if sent, err := c.write(ctx, frame); err != nil {
		t.mu.Lock()
		_, mine := c.waiters[id]
		delete(c.waiters, id) // nothing answers it: no ID to reserve
		t.mu.Unlock()
		if mine {
			t.putReply(ch)
		}
		if sent {
			// A failed write leaves the TLS stream unusable: the reader
			// sees the close and fails the other exchanges on c.
			_ = c.conn.Close()
		}
		t.release(c, sent || errors.Is(err, context.DeadlineExceeded))
		return nil, 0, isStale(err) || errors.Is(err, net.ErrClosed), ioError(ctx, "writing to", t.label, err)
	}

	if rep, ok := t.await(ctx, ch); ok {
		t.putReply(ch)
		t.release(c, false)
		if rep.err != nil {
			return nil, 0, rep.stale, rep.err
		}
		return rep.raw, id, false, nil
	}
	t.mu.Lock()
	mine := false
	if w, ok := c.waiters[id]; ok && w == ch {
		// Keep the ID reserved until the late answer comes, so it cannot
		// pass for a later query's.
		c.waiters[id] = nil
		c.abandoned++
		mine = true
	}
	retire := errors.Is(ctx.Err(), context.DeadlineExceeded) || c.abandoned > maxAbandoned
	t.mu.Unlock()
	if mine {
		t.putReply(ch) // the reader can no longer reach it
	}
	t.release(c, retire)
	return nil, 0, false, fmt.Errorf("reading from %s: %w", t.label, ctx.Err())
}

// await waits for the reader's reply on ch until ctx ends. Under a
// LazyContext it waits with a timer of the transport's and polls Err
// (see LazyContext), so that an attempt's context arms nothing.
func (t *TLS) await(ctx context.Context, ch chan dotReply) (dotReply, bool) {
	if _, lazy := ctx.(LazyContext); !lazy {
		select {
		case rep := <-ch:
			return rep, true
		case <-ctx.Done():
			return dotReply{}, false
		}
	}
	now := time.Now()
	tm := t.timers.Get(nextPoll(ctx, now).Sub(now))
	defer t.timers.Put(tm)
	for {
		select {
		case rep := <-ch:
			return rep, true
		case <-tm.C:
			if ctx.Err() != nil {
				return dotReply{}, false
			}
			now := time.Now()
			tm.Reset(nextPoll(ctx, now).Sub(now))
		}
	}
}

// reply returns an empty channel for one exchange's reply.
func (t *TLS) reply() chan dotReply {
	if ch, ok := t.replies.Get().(chan dotReply); ok {
		return ch
	}
	return make(chan dotReply, 1)
}

// putReply keeps ch, empty and out of the reader's reach, for another
// exchange.
func (t *TLS) putReply(ch chan dotReply) { t.replies.Put(ch) }

// newIDLocked returns a random wire ID no exchange on c is using or has
// abandoned. A connection holds at most a few thousand, so the first draw
// almost always succeeds.
func (c *dotConn) newIDLocked() uint16 {
	for {
		id := uint16(rand.Uint32())
		if _, taken := c.waiters[id]; !taken {
			return id
		}
	}
}

// write sends frame when the other exchanges' frames are out. Waiting for
// the turn ends with ctx; the write itself ends only with ctx's deadline
// (or dotWriteTimeout without one), never its cancellation: a frame cut
// short would corrupt the stream every exchange on c shares. sent reports
// whether the write began.
func (c *dotConn) write(ctx context.Context, frame []byte) (sent bool, err error) {
	if err := c.turn(ctx); err != nil {
		return false, err
	}
	defer func() { <-c.wsem }()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(dotWriteTimeout)
	}
	_ = c.conn.SetWriteDeadline(deadline) // fails only on a closed connection; Write reports it
	_, err = c.conn.Write(frame)
	return true, err
}

// turn waits until c's write turn is the caller's (wsem taken) or ctx
// ends. A LazyContext is not asked for Done, which would arm it: the turn
// is taken at once when free, as it almost always is, and otherwise
// waited for with a timer of the transport's that polls Err.
func (c *dotConn) turn(ctx context.Context) error {
	if _, lazy := ctx.(LazyContext); !lazy {
		select {
		case c.wsem <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case c.wsem <- struct{}{}:
		return nil
	default:
	}
	now := time.Now()
	tm := c.t.timers.Get(nextPoll(ctx, now).Sub(now))
	defer c.t.timers.Put(tm)
	for {
		select {
		case c.wsem <- struct{}{}:
			return nil
		case <-tm.C:
			if err := ctx.Err(); err != nil {
				return err
			}
			now := time.Now()
			tm.Reset(nextPoll(ctx, now).Sub(now))
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
		if n, err := io.ReadFull(c.conn, prefix[:]); err != nil {
			c.fail(err, n == 0)
			return
		}
		n := int(binary.BigEndian.Uint16(prefix[:]))
		raw := getBuf(n)[:n]
		if _, err := io.ReadFull(c.conn, raw); err != nil {
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
		ch, ok := c.waiters[id]
		if ok {
			delete(c.waiters, id)
			if ch == nil {
				c.abandoned--
			}
		}
		t.mu.Unlock()
		if !ok {
			putBuf(raw)
			c.fail(fmt.Errorf("%w: an answer with ID %d, which no query on the connection has", ErrIDMismatch, id), false)
			return
		}
		if ch != nil {
			ch <- dotReply{raw: raw}
		} else {
			putBuf(raw) // a late answer: nobody waits for it
		}
	}
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
	for _, ch := range waiters {
		if ch != nil {
			ch <- rep
		}
	}
}

// packFrame packs m behind its two-byte length into buf (from
// getBuf(smallBufLen)), or into a fresh slice when it outgrows buf. The wire
// ID is left 0 for the exchange to set: it depends on the connection.
func packFrame(m *dns.Msg, buf []byte) ([]byte, error) {
	query, err := packQuery(m, 0, buf[2:])
	if err != nil {
		return nil, err
	}
	if len(query) > maxMsgLen {
		return nil, fmt.Errorf("%w: %d bytes do not fit a TCP frame", ErrPack, len(query))
	}
	var frame []byte
	if len(query) <= len(buf)-2 && &query[0] == &buf[2] {
		frame = buf[:2+len(query)]
	} else {
		frame = make([]byte, 2+len(query))
		copy(frame[2:], query)
	}
	binary.BigEndian.PutUint16(frame, uint16(len(query)))
	return frame, nil
}
