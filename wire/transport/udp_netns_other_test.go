//go:build !linux

package transport

import "testing"

// inOwnNetns skips t: network namespaces are Linux's.
func inOwnNetns(t *testing.T) bool {
	t.Skip("no network namespace of its own for this test on this platform")
	return false
}
