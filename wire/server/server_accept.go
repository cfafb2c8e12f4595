package server

import (
	"errors"
	"net"
	"time"

	"go.uber.org/zap"
)

// An error that persists in an accept loop or a UDP reader (out of file
// descriptors, a socket gone bad) is a resource shortage, not a client's
// fault: the loop backs off between these bounds instead of spinning on it.
const (
	minErrorBackoff = 5 * time.Millisecond
	maxErrorBackoff = time.Second
)

// acceptEach is an accept loop: it hands each connection accept returns
// to serve, on the loop's goroutine, and backs off on errors (what names
// them in the log, "accepting tcp"). It ends when Shutdown closes the
// listener.
func acceptEach[C any](s *Server, what string, accept func() (C, error), serve func(C)) {
	var backoff time.Duration
	for {
		c, err := accept()
		if err != nil {
			if s.ended(err) || !s.backOff(&backoff, what, err) {
				return
			}
			continue
		}
		backoff = 0
		serve(c)
	}
}

// ended reports whether err, of an accept or a read on a listening socket,
// means that the server is shutting down (or the socket closed under it),
// not a failure to back off from.
func (s *Server) ended(err error) bool {
	return s.closing.Load() || errors.Is(err, net.ErrClosed)
}

// backOff logs err, which the loop met while doing what ("accepting tcp"),
// and waits the next step of the loop's backoff, *d: doubled from
// minErrorBackoff up to maxErrorBackoff. The loop owns d and resets it to
// zero after its next success. backOff reports false, at once, when
// Shutdown begins meanwhile: the loop ends then.
func (s *Server) backOff(d *time.Duration, what string, err error) bool {
	*d = min(max(2**d, minErrorBackoff), maxErrorBackoff)
	s.log.Warn(what, zap.Error(err), zap.Duration("retry_in", *d))
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}
