package daemon

import (
	"testing"

	"github.com/nxdnsd/nxdnsd/config"
)

// The cache's background refreshes get half the enabled upstreams' slots,
// at least one.
func TestRefreshSlots(t *testing.T) {
	off := false
	for _, tt := range []struct {
		ups  []config.Upstream
		want int
	}{
		{[]config.Upstream{{Slots: 32}}, 16},
		{[]config.Upstream{{Slots: 32}, {Slots: 32}}, 32},
		{[]config.Upstream{{Slots: 32}, {Slots: 4096, Enabled: &off}}, 16},
		{[]config.Upstream{{Slots: 1}}, 1},
	} {
		if got := refreshSlots(tt.ups); got != tt.want {
			t.Errorf("refreshSlots(%+v) = %d, want %d", tt.ups, got, tt.want)
		}
	}
}
