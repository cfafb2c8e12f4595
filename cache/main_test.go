package cache

import (
	"testing"

	"go.uber.org/goleak"
)

// The cache starts no goroutine; goleak keeps it so.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
