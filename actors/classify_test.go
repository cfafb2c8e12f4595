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
		if _, ok := sentinelGroups[s]; !ok {
			t.Errorf("wire sentinel %q has no group in sentinelGroups", s)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Group
	}{
		{wire.ErrBudgetExhausted, GroupBudgetExhausted},
		{fmt.Errorf("dialing: %w", wire.ErrBudgetExhausted), GroupBudgetExhausted},
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
