package server

import (
	"context"
	"time"
)

// Shutdown stops the server. It stops reading and accepting at once (TCP
// listeners are closed, so new connections are refused), closes TCP
// connections as soon as they have no query in flight, and lets queries in
// flight finish and their answers be written. If ctx expires first, it
// cancels the context the handlers were given, gives up answers not yet
// written, and returns ctx.Err() once they have returned.
//
// Shutdown returns only when every goroutine the server started has ended;
// the UDP sockets are closed last, because in-flight UDP answers are sent
// from them. Later calls wait the same way and return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	first := !s.stopped
	s.stopped = true
	if !s.started {
		s.mu.Unlock()
		return nil
	}
	var conns []*clientConn
	if first {
		s.closing.Store(true)
		conns = s.connsLocked()
	}
	s.mu.Unlock()

	if first {
		close(s.done)
		for _, pc := range s.udp {
			pc.SetReadDeadline(aLongTimeAgo)
		}
		for _, l := range s.listeners {
			l.Close()
		}
		s.shutdownEncrypted(ctx)
		// A connection whose read loop is blocked waiting for a query
		// wakes up, sees closing, waits for its queries in flight and
		// closes itself.
		for _, c := range conns {
			c.conn.SetReadDeadline(aLongTimeAgo)
		}
	}

	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		select {
		case <-finished: // both were ready; the work did finish in time
		default:
			err = ctx.Err()
			s.abort()
			<-finished
		}
	}
	s.cancel()
	s.closeUDP.Do(func() {
		for _, pc := range s.udp {
			pc.Close()
		}
	})
	if !first {
		return nil
	}
	return err
}

// abort cancels the handlers' context and makes pending TCP writes fail,
// so that handlers honouring ctx let Shutdown return promptly.
func (s *Server) abort() {
	s.aborted.Store(true)
	s.cancel()
	s.abortHTTPS()
	s.mu.Lock()
	conns := s.connsLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.conn.SetDeadline(aLongTimeAgo)
	}
}

func (s *Server) connsLocked() []*clientConn {
	conns := make([]*clientConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes on a socket return at once (the trick net/http uses).
var aLongTimeAgo = time.Unix(1, 0)
