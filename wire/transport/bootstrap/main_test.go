package bootstrap

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// refreshes, the transports and the fakes must all have ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
