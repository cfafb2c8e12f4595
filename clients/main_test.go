package clients

import (
	"testing"

	"go.uber.org/goleak"
)

// Close must end the watcher, the resolver and every lookup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
