package daemon

import (
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
)

// looped is every pool's actors.HealthPolicy.OnLoop: it logs a loop found
// through an upstream, once, at warn (the upstream is out of service until
// a check no longer loops: docs/operations.md, "Forwarding loops"), and
// its end at info. It runs on the upstream's actor goroutine.
func (d *Daemon) looped(upstream string, looping bool, st actors.Status) {
	if looping {
		d.log.Warn("forwarding loop: queries sent to this upstream come back to nxdnsd; it is out of service until a loop check no longer comes back",
			zap.String("upstream", upstream), zap.String("address", st.Address),
			zap.Time("next_check", st.BackoffUntil))
		return
	}
	d.log.Info("forwarding loop gone: the upstream's loop check no longer comes back",
		zap.String("upstream", upstream), zap.String("address", st.Address))
}
