package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// dohMediaType is the DNS wire format's media type (RFC 8484 6).
const dohMediaType = "application/dns-message"

// HTTP/2 health checks of DoH connections. A connection a NAT box forgot
// fails no request outright: without a check every query on it would wait
// its full attempt budget, the pool blaming the upstream each time.
const (
	// dohPingAfter: a connection that has received no frame for this long
	// is pinged.
	dohPingAfter = 10 * time.Second
	// dohPingTimeout: a connection whose ping is not answered within this
	// is closed, failing the requests on it.
	dohPingTimeout = 5 * time.Second
)

// HTTPS exchanges queries with one upstream over DNS over HTTPS, the
// "https://HOST[:PORT]/PATH" address form (RFC 8484): each query a POST of
// application/dns-message, over HTTP/2 when the server offers it (it
// should: RFC 8484 5.2), the connection kept and shared by concurrent
// queries. (A burst before the first connection is up may dial a few;
// HTTP/2 keeps one and closes the others.) The certificate is verified for
// HOST.
//
// Queries go out with wire ID 0, as RFC 8484 4.1 recommends, and answers
// come back with the query's ID. Any status but 200, a content type other
// than application/dns-message, a body that does not decode or is larger
// than a DNS message are the upstream's faults. A cancelled exchange
// cancels its own request only: on HTTP/2 that resets one stream, never the
// connection the others share.
//
// Proxy environment variables are ignored: the upstream is dialled
// directly, at WithDialIP's address when given.
//
// An HTTPS is safe for concurrent use.
type HTTPS struct {
	url       string // the request URL: the address in its canonical form
	label     string // the same redacted (Address.Redacted), naming the upstream in errors
	client    http.Client
	transport *http.Transport // the client's; Close closes its idle connections
	hd        hostDialer      // where to dial: the pinned ip, or HOST looked up

	// target is what the last lookup of HOST found, for the dialer; nil
	// before the first, and always nil when an address is pinned.
	target atomic.Pointer[Resolved]
}

var _ Transport = (*HTTPS)(nil)

// NewHTTPS returns a DoH transport posting to addr, an https:// address
// (see ParseAddress). Its HOST is the name the server's certificate must
// carry; WithDialIP pins the address dialled, WithResolver looks HOST up
// when it is a name and no address is pinned, WithRootCAs chooses the
// roots, WithMaxConns and WithMaxIdle bound the HTTP connections, which
// live DefaultTLSIdleTimeout when idle. It opens no
// connection until the first exchange; it fails only when addr is not an
// https:// address.
func NewHTTPS(addr Address, opts ...Option) (*HTTPS, error) {
	o, hd, conf, err := tlsSetup(addr, "https", opts)
	if err != nil {
		return nil, err
	}
	h := &HTTPS{url: addr.String(), label: addr.Redacted(), hd: hd}

	tr := &http.Transport{
		// The transport talks to one server only: every connection goes
		// to its address, pinned or looked up by Exchange beforehand.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var addrs []netip.Addr
			if h.hd.needsLookup() {
				r := h.target.Load()
				if r == nil { // Exchange looks up before it posts
					return nil, fmt.Errorf("%w %s: not looked up yet", ErrBootstrap, addr.host)
				}
				addrs = r.Addrs
			}
			return h.hd.dial(ctx, addrs)
		},
		TLSClientConfig:     conf,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        o.maxIdle,
		MaxIdleConnsPerHost: o.maxIdle,
		DisableKeepAlives:   o.maxIdle == 0, // 0 would mean http's default of 2
		MaxConnsPerHost:     o.maxConns,
		IdleConnTimeout:     o.idleTimeoutOr(DefaultTLSIdleTimeout),
		DisableCompression:  true, // DNS messages are small; gzip costs more than it saves
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: dohPingAfter,
			PingTimeout:     dohPingTimeout,
		},
	}
	h.client = http.Client{
		Transport: tr,
		// A DoH server that redirects is misconfigured, and following
		// would turn the POST into a bodiless GET: the 3xx is the
		// answer, and ErrHTTPStatus its error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	h.transport = tr
	return h, nil
}

// Exchange posts q and returns its answer as a Msg, as the Exchanger
// contract says: expiry and ctx bound the dial, the handshake, the request
// and the body. Errors name the upstream and keep their chain for errors.Is
// and errors.As: ErrHTTPStatus, ErrContentType and the other sentinels of
// this package, context errors, syscall errors, and crypto/tls and
// crypto/x509 errors for a failed handshake or verification.
func (h *HTTPS) Exchange(ctx context.Context, q *Query, expiry time.Time) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, fmt.Errorf("exchanging with %s: %w", h.label, err)
	}
	if len(q.Packed) < dnsmsg.HeaderLen || len(q.Packed) > maxMsgLen {
		return Answer{}, fmt.Errorf("%w: a %d-byte query", ErrPack, len(q.Packed))
	}
	if h.hd.needsLookup() {
		if err := h.lookup(ctx, expiry); err != nil {
			return Answer{}, fmt.Errorf("dialing %s: %w", h.label, err)
		}
	}
	// net/http takes a context: the deadline becomes one.
	ctx, cancel := withExpiry(ctx, expiry)
	defer cancel()
	r, err := h.post(ctx, q)
	return Answer{Msg: r}, err
}

// lookup makes sure the dialer has addresses for HOST that are not due
// yet, asking the resolver when they are, here rather than in the dialer:
// net/http dials under a context without the request's deadline, and
// the request would end at its expiry, charged to the upstream, while a
// lookup stalled. A lookup that fails is ErrBootstrap, before expiry.
// On the query path it costs an atomic load and a clock reading per
// exchange, for upstreams without ip only.
func (h *HTTPS) lookup(ctx context.Context, expiry time.Time) error {
	if r := h.target.Load(); r != nil && time.Now().Before(r.Until) {
		return nil
	}
	r, err := h.hd.resolve(ctx, bound(ctx, expiry))
	if err != nil {
		return err
	}
	h.target.Store(&r)
	return nil
}

// post is one DoH request for q under ctx.
func (h *HTTPS) post(ctx context.Context, q *Query) (*dns.Msg, error) {
	m := q.Msg
	qbuf := getBuf(len(q.Packed))
	defer putBuf(qbuf)
	query := qbuf[:copy(qbuf, q.Packed)]
	query[0], query[1] = 0, 0 // RFC 8484 4.1: ID 0, for HTTP caches
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(query))
	if err != nil {
		return nil, fmt.Errorf("posting to %s: %w", h.label, err)
	}
	req.Header.Set("Content-Type", dohMediaType)
	req.Header.Set("Accept", dohMediaType)

	resp, err := h.client.Do(req)
	if err != nil {
		// The url.Error repeats the URL the label already gives; its Err
		// keeps the chain.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, ioError(ctx, "posting to", h.label, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("posting to %s: %w: %s", h.label, ErrHTTPStatus, resp.Status)
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != dohMediaType {
		return nil, fmt.Errorf("posting to %s: %w: %q", h.label, ErrContentType, ct)
	}
	if resp.ContentLength > maxMsgLen {
		return nil, fmt.Errorf("reading from %s: %w: a %d-byte body", h.label, ErrMalformed, resp.ContentLength)
	}

	size := largeBufLen
	if resp.ContentLength >= 0 {
		size = int(resp.ContentLength)
	}
	buf := getBuf(size)
	defer putBuf(buf)
	raw, err := readMessage(resp.Body, buf)
	if err != nil {
		return nil, ioError(ctx, "reading from", h.label, err)
	}
	r, err := decodeReply(m, 0, raw)
	if err != nil {
		return nil, fmt.Errorf("reading from %s: %w", h.label, err)
	}
	return r, nil
}

// readMessage reads body, one DNS message, into buf. A body longer than a
// DNS message, or than buf, is ErrMalformed.
func readMessage(body io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:min(len(buf), maxMsgLen)]
	n, err := io.ReadFull(body, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	var more [1]byte
	if _, err := io.ReadFull(body, more[:]); errors.Is(err, io.EOF) {
		return buf, nil
	} else if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: a body longer than %d bytes", ErrMalformed, len(buf))
}

// Close closes the idle connections. Exchanges in flight finish (their
// contexts bound them); later exchanges still work. HTTP/2 connections end
// their goroutines once closed.
func (h *HTTPS) Close() error {
	h.transport.CloseIdleConnections()
	return nil
}
