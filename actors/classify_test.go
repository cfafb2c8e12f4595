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

	"github.com/nxdnsd/nxdnsd/wire"
)

// Every sentinel a transport can return must be placed deliberately.
func TestEverySentinelIsPlaced(t *testing.T) {
	for _, s := range wire.Sentinels() {
		placed := false
		for _, g := range sentinelGroups {
			placed = placed || g.err == s
		}
		if !placed {
			t.Errorf("wire sentinel %q has no group in sentinelGroups", s)
		}
	}
}

// An error that wraps two sentinels of different groups is placed the same
// way every time, by the order of sentinelGroups: a failure to pack is
// ours, whatever else it wraps. Classify used to walk a map, whose order Go
// randomises: this test failed then (in almost every run, as it asks 200
// times).
func TestClassifyOrderIsFixed(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %w", wire.ErrPack, wire.ErrMalformed),
		fmt.Errorf("%w: %w", wire.ErrRefused, wire.ErrPack),
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
		{wire.ErrRefused, GroupPeerFault},
		{fmt.Errorf("x: %w", wire.ErrIDMismatch), GroupPeerFault},
		{wire.ErrQuestionMismatch, GroupPeerFault},
		{wire.ErrMalformed, GroupPeerFault},
		{io.EOF, GroupPeerFault},
		{&net.OpError{Op: "read", Err: syscall.ECONNREFUSED}, GroupPeerFault},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, GroupPeerFault},
		{&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "socket", Err: syscall.EMFILE}}, GroupLocalResource},
		{syscall.ENFILE, GroupLocalResource},
		{syscall.ENOBUFS, GroupLocalResource},
		{syscall.EADDRNOTAVAIL, GroupLocalResource},
		{fmt.Errorf("%w: %w", wire.ErrPack, errors.New("label too long")), GroupLocalResource},
		{errors.New("something new"), GroupPeerFault},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
