// Package sdnotify tells systemd about the service's state (sd_notify(3)):
// one datagram of newline-separated VAR=value assignments to the socket
// named by $NOTIFY_SOCKET. It is the part of the protocol a Type=notify
// service needs, and nothing else: no watchdog, no file descriptor store.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// States a service sends (sd_notify(3)).
const (
	// Ready: start-up is finished (every listener bound), or a reload is.
	Ready = "READY=1"
	// Stopping: the service is shutting down.
	Stopping = "STOPPING=1"
)

// Reloading is the state sent when a reload begins. systemd 253 and
// later want the CLOCK_MONOTONIC time with it, to match the READY=1 that
// ends the reload with this reload; older versions ignore it. now is the
// monotonic clock (Monotonic).
func Reloading(now time.Duration) string {
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(now.Microseconds(), 10)
}

// Status is a one-line description of the service's state, which
// systemctl status shows.
func Status(s string) string {
	return "STATUS=" + strings.ReplaceAll(s, "\n", " ")
}

// Notifier sends states to the service manager. The zero Notifier, and one
// from New without $NOTIFY_SOCKET, sends nothing: outside systemd (or with
// Type=exec) notifying is a no-op.
type Notifier struct {
	addr *net.UnixAddr // or nil: no service manager listens
}

// ErrUnsupported is returned by New for a $NOTIFY_SOCKET this package
// cannot write to (an AF_VSOCK address).
var ErrUnsupported = errors.New("sdnotify: unsupported NOTIFY_SOCKET")

// New returns a Notifier for the socket named by socket, the value of
// $NOTIFY_SOCKET: a file system path, or an abstract socket's name after
// '@'. An empty socket gives a Notifier that sends nothing.
func New(socket string) (*Notifier, error) {
	switch {
	case socket == "":
		return &Notifier{}, nil
	case socket[0] == '/' || socket[0] == '@':
		// Go maps a leading '@' to the abstract namespace's leading NUL.
		return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}, nil
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, socket)
	}
}

// Enabled reports whether a service manager listens.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends the states, one datagram with one assignment per line. It
// does nothing when no service manager listens. A failure to send is
// returned: the caller logs it; the service goes on.
func (n *Notifier) Notify(states ...string) error {
	if !n.Enabled() || len(states) == 0 {
		return nil
	}
	// A socket per message: they are a handful in the life of the
	// process, and a fresh one survives the manager re-creating its
	// socket (systemctl daemon-reexec).
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(strings.Join(states, "\n"))); err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	return nil
}
