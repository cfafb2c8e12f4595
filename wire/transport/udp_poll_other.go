//go:build !linux

package transport

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"
)

// havePoller: elsewhere than on Linux every exchange reads its own socket
// (udpDialer).
const havePoller = false

// udpPoller is Linux's; here it is never made.
type udpPoller struct {
	ended atomic.Bool // never raised
}

func newUDPPoller(netip.AddrPort, string, *atomic.Uint64) (*udpPoller, error) {
	return nil, errors.New("no poller of UDP sockets on this platform")
}

func (*udpPoller) exchange(context.Context, []byte, []byte, uint16, time.Time) (int, error) {
	return 0, errors.New("no poller of UDP sockets on this platform")
}

func (*udpPoller) close() {}

func (*udpPoller) inFlight() int { return 0 }
