package forward

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// client and fake server must stop what it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
