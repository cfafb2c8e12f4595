package transport

import (
	"testing"

	"github.com/nxdnsd/nxdnsd/internal/netnstest"
)

// inOwnNetns runs the calling test in a network namespace of its own
// (netnstest.InOwn): a test that sends datagrams to random ports runs
// there, so that they reach no socket of another test or process.
func inOwnNetns(t *testing.T) bool { return netnstest.InOwn(t) }
