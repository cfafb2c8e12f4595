package server

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// PortTakenSection is the title of docs/install.md's section on freeing a
// port that another program holds. The error of a listener whose address
// is taken names it, so that the journal line leads to the fix; the doc
// quotes that error's words (TestPortTakenNamesTheDoc in cmd/nxdnsd keeps
// the two in step).
const PortTakenSection = "Port 53 is taken"

// bindError is the error of a client listener that could not bind ap
// over proto ("udp" or "tcp"). When another socket holds the address
// (EADDRINUSE), it says which address is taken, who usually holds port 53,
// how to see who does, and where the fix is.
func bindError(proto string, ap netip.AddrPort, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listening on %s %s: %w", proto, ap, err)
	}
	holder := "another program, or another nxdnsd,"
	if ap.Port() == 53 {
		holder = "another DNS server (usually systemd-resolved, dnsmasq or pihole-FTL)"
	}
	return fmt.Errorf("listening on %s %s: the address is taken: %s holds %s or an address on its port; "+
		"see who with `sudo ss -lntup 'sport = :%d'`, and %q in docs/install.md: %w",
		proto, ap, holder, ap, ap.Port(), PortTakenSection, err)
}
