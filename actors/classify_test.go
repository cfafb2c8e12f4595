package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nxdnsd/nxdnsd/internal/gosrc"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Every sentinel a transport can return must be placed deliberately. The
// sentinels are found in wire/transport's source, so a new one cannot be
// declared without a decision here. Mutation checks: deleting a row of
// sentinelGroups, or declaring another exported errors.New variable in
// wire/transport, fails it.
func TestEverySentinelIsPlaced(t *testing.T) {
	sentinels := map[string]error{
		"ErrRefused":          transport.ErrRefused,
		"ErrIDMismatch":       transport.ErrIDMismatch,
		"ErrQuestionMismatch": transport.ErrQuestionMismatch,
		"ErrMalformed":        transport.ErrMalformed,
		"ErrPack":             transport.ErrPack,
		"ErrResolverTimeout":  transport.ErrResolverTimeout,
		"ErrHTTPStatus":       transport.ErrHTTPStatus,
		"ErrContentType":      transport.ErrContentType,
		"ErrBootstrap":        transport.ErrBootstrap,
	}
	declared, err := gosrc.ErrorVars("../wire/transport")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range declared {
		s, ok := sentinels[name]
		if !ok {
			t.Errorf("wire/transport declares %s: add it to this test and give it a group in sentinelGroups", name)
			continue
		}
		placed := false
		for _, g := range sentinelGroups {
			placed = placed || g.err == s
		}
		if !placed {
			t.Errorf("wire sentinel %s (%q) has no group in sentinelGroups", name, s)
		}
	}
	if len(declared) < len(sentinels) {
		t.Errorf("wire/transport declares %v, fewer than this test lists", declared)
	}
}

// An error that wraps two sentinels of different groups is placed the same
// way every time, by the order of sentinelGroups: a failure to pack is
// ours, whatever else it wraps. Classify used to walk a map, whose order Go
// randomises: this test failed then (in almost every run, as it asks 200
// times).
func TestClassifyOrderIsFixed(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %w", transport.ErrPack, transport.ErrMalformed),
		fmt.Errorf("%w: %w", transport.ErrRefused, transport.ErrPack),
	} {
		for range 200 {
			if got := Classify(err); got != GroupLocalResource {
				t.Fatalf("Classify(%v) = %v, want %v every time", err, got, GroupLocalResource)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Group
	}{
		{ErrBudgetExhausted, GroupBudgetExhausted},
		{fmt.Errorf("dialing: %w", ErrBudgetExhausted), GroupBudgetExhausted},
		{context.Canceled, GroupCanceled},
		{fmt.Errorf("reading: %w", context.Canceled), GroupCanceled},
		{context.DeadlineExceeded, GroupPeerFault}, // a completed transport timeout of its own
		{os.ErrDeadlineExceeded, GroupPeerFault},
		{transport.ErrRefused, GroupPeerFault},
		{fmt.Errorf("x: %w", transport.ErrIDMismatch), GroupPeerFault},
		{transport.ErrQuestionMismatch, GroupPeerFault},
		{transport.ErrMalformed, GroupPeerFault},
		{io.EOF, GroupPeerFault},
		{&net.OpError{Op: "read", Err: syscall.ECONNREFUSED}, GroupPeerFault},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, GroupPeerFault},
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "socket", Err: syscall.EMFILE}}, GroupLocalResource},
		{syscall.ENFILE, GroupLocalResource},
		{syscall.ENOBUFS, GroupLocalResource},
		{syscall.EADDRNOTAVAIL, GroupLocalResource},
		{fmt.Errorf("%w: %w", transport.ErrPack, errors.New("label too long")), GroupLocalResource},
		{errors.New("something new"), GroupPeerFault},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// opErr is err as the net package reports it from op ("dial", "write",
// "read") through syscall, wrapped as a transport wraps it.
func opErr(op, syscallName string, err syscall.Errno) error {
	return fmt.Errorf("exchanging with udp://192.0.2.1:53: %w",
		&net.OpError{Op: op, Net: "udp", Err: &os.SyscallError{Syscall: syscallName, Err: err}})
}

// A dead link is not a dead upstream: every error by which this host's
// own stack says it has no way there is local, whether it comes from
// connect, from a send or bare, and the query fails over after it
// (NoRoute). The same errno read from a socket afterwards is an ICMP
// error from the path about this upstream, which the UDP transport ties
// to the query it quotes: a peer fault.
func TestNoRouteIsLocal(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN, syscall.EADDRNOTAVAIL} {
		t.Run(errno.Error(), func(t *testing.T) {
			for _, err := range []error{
				opErr("dial", "connect", errno),
				opErr("write", "write", errno),
				fmt.Errorf("dialing: %w", errno),
			} {
				if got := Classify(err); got != GroupLocalResource {
					t.Errorf("Classify(%v) = %v, want %v", err, got, GroupLocalResource)
				}
				if !NoRoute(err) {
					t.Errorf("NoRoute(%v) = false: the query would end instead of failing over", err)
				}
			}
		})
	}
}

// Which way an ICMP unreachable from the path goes: decided in
// classify.go (routeErrnos) — against the upstream.
func TestUnreachableFromThePathIsAPeerFault(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ECONNREFUSED} {
		err := opErr("read", "read", errno)
		if got := Classify(err); got != GroupPeerFault {
			t.Errorf("Classify(%v) = %v, want %v", err, got, GroupPeerFault)
		}
		if NoRoute(err) {
			t.Errorf("NoRoute(%v) = true", err)
		}
	}
	// ENETDOWN and EADDRNOTAVAIL are this host's whoever reports them.
	for _, errno := range []syscall.Errno{syscall.ENETDOWN, syscall.EADDRNOTAVAIL} {
		if err := opErr("read", "read", errno); Classify(err) != GroupLocalResource {
			t.Errorf("Classify(%v) = %v, want %v", err, Classify(err), GroupLocalResource)
		}
	}
}

// A failed bootstrap lookup of an upstream's host name is local, whatever
// the bootstrap resolver said (its REFUSED, its timeout, a system error of
// the lookup's socket), and the query fails over: another upstream may
// have its address. Without ErrBootstrap first in sentinelGroups the
// wrapped REFUSED made it a peer fault.
func TestBootstrapFailureIsLocal(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("dialing tls://dot.test:853: %w dot.test: 127.0.0.1:53: refused", transport.ErrBootstrap),
		fmt.Errorf("dialing: %w: %w", transport.ErrBootstrap, transport.ErrRefused),
		fmt.Errorf("dialing: %w: %w", transport.ErrBootstrap, transport.ErrResolverTimeout),
		fmt.Errorf("dialing: %w: %w", transport.ErrBootstrap, opErr("read", "read", syscall.ECONNREFUSED)),
	} {
		if got := Classify(err); got != GroupLocalResource {
			t.Errorf("Classify(%v) = %v, want %v", err, got, GroupLocalResource)
		}
		if !NoRoute(err) {
			t.Errorf("NoRoute(%v) = false: the query would end instead of failing over", err)
		}
	}
}

// Running out of something is local but no route: the query ends, as
// spec section 4's table says, instead of failing over.
func TestResourceErrorsAreNotNoRoute(t *testing.T) {
	for _, err := range []error{
		opErr("dial", "socket", syscall.EMFILE),
		syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		transport.ErrPack, errRefused, context.Canceled,
	} {
		if NoRoute(err) {
			t.Errorf("NoRoute(%v) = true", err)
		}
	}
}
