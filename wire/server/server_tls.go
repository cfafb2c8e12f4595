package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"
)

// Protocols of the encrypted listeners, as Request.Proto and the query
// log name them (spec section 14).
const (
	ProtoTLS   = "tls"
	ProtoHTTPS = "https"
)

// DNS over TLS (RFC 7858) is DNS over TCP inside TLS: the same framing,
// the same read loop (clientConn), the same pipelining with answers out of
// order, the same idle timeout and the same connection count. The only
// step of its own is the handshake, which the connection's goroutine
// makes before its first read, bounded by TCPIdleTimeout like a query.

// dotALPN is the ALPN protocol of DNS over TLS (RFC 7858 section 3.1,
// registered by IANA); clients that offer none are served as well.
const dotALPN = "dot"

// minTLSVersion is the oldest TLS the encrypted listeners speak: RFC 7858
// and RFC 8484 (through RFC 7540's HTTP/2 profile) ask for TLS 1.2 or
// later.
const minTLSVersion = tls.VersionTLS12

// bindEncryptedLocked binds the TCP sockets of TLSListen and HTTPSListen.
// On an error the caller (bindLocked) closes what was bound.
func (s *Server) bindEncryptedLocked() error {
	if len(s.TLSListen)+len(s.HTTPSListen) == 0 {
		return nil
	}
	if s.TLSConfig == nil {
		return errors.New("wire: tls_listen and https_listen need a TLS configuration")
	}
	for _, a := range s.TLSListen {
		l, err := listenTCP(a)
		if err != nil {
			return err
		}
		s.tlsListeners = append(s.tlsListeners, l)
	}
	for _, a := range s.HTTPSListen {
		l, err := listenTCP(a)
		if err != nil {
			return err
		}
		s.https = append(s.https, &httpsListener{tcp: l})
	}
	return nil
}

// listenTCP binds a TCP socket to the address a.
func listenTCP(a string) (*net.TCPListener, error) {
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		return nil, fmt.Errorf("parsing listen address %q: %w", a, err)
	}
	l, err := net.ListenTCP(tcpNetwork(ap), net.TCPAddrFromAddrPort(ap))
	if err != nil {
		return nil, bindError("tcp", ap, err)
	}
	return l, nil
}

// closeEncryptedLocked closes the sockets bindEncryptedLocked bound, for a
// Start that failed.
func (s *Server) closeEncryptedLocked() {
	for _, l := range s.tlsListeners {
		l.Close()
	}
	for _, h := range s.https {
		h.tcp.Close()
	}
	s.tlsListeners, s.https = nil, nil
}

// startEncrypted starts the accept loops of the encrypted listeners; Start
// calls it once everything is bound and the limits are set.
func (s *Server) startEncrypted() {
	if len(s.tlsListeners) > 0 {
		s.dotConfig = s.TLSConfig.Clone()
		s.dotConfig.MinVersion = max(s.dotConfig.MinVersion, minTLSVersion)
		s.dotConfig.NextProtos = []string{dotALPN}
	}
	for _, l := range s.tlsListeners {
		s.wg.Go(func() { s.acceptTCP(l, ProtoTLS) })
		s.log.Info("serving", zap.String("proto", ProtoTLS), zap.Stringer("addr", l.Addr()))
	}
	for _, h := range s.https {
		s.startHTTPS(h)
		s.log.Info("serving", zap.String("proto", ProtoHTTPS), zap.Stringer("addr", h.tcp.Addr()))
	}
}

// wrapConn returns the connection the read loop of a client connection
// of proto reads: c itself, or a TLS server connection over it whose
// handshake the read loop makes (clientConn.handshake).
func (s *Server) wrapConn(c *net.TCPConn, proto string) net.Conn {
	if proto == ProtoTLS {
		return tls.Server(c, s.dotConfig)
	}
	return c
}

// handshake makes a DoT connection's TLS handshake, bounded by the idle
// timeout, and reports whether the connection is to be served; a plain
// TCP connection has none to make.
func (c *clientConn) handshake() bool {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		return true
	}
	s := c.s
	if err := c.conn.SetDeadline(time.Now().Add(s.idle)); err != nil {
		return false
	}
	// The same handshake with Shutdown as readOne's: either we see the
	// flag, or its deadline in the past comes after ours.
	if s.closing.Load() {
		return false
	}
	if err := tc.Handshake(); err != nil {
		s.log.Debug("tls handshake", zap.Stringer("client", c.client), zap.Error(err))
		return false
	}
	return true
}

// EncryptedAddrs returns the addresses actually bound for TLSListen and
// HTTPSListen, in their order; nil before Start.
func (s *Server) EncryptedAddrs() (dot, doh []net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.tlsListeners {
		dot = append(dot, l.Addr())
	}
	for _, h := range s.https {
		doh = append(doh, h.tcp.Addr())
	}
	return dot, doh
}
