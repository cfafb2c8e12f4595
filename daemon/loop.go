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

// noneInService is every pool's actors.HealthPolicy.OnLoopLeavesNone: a
// loop just found took out the last upstream in service. Every query now
// fails (SERVFAIL), unless one of the upstreams in backoff answers it in
// pass two; an nxdnsd that answers nothing says so at error, with what
// each upstream is doing. It runs on the upstream's actor goroutine.
func (d *Daemon) noneInService(upstream string, pool []actors.Status) {
	var looping, backoff []string
	for _, st := range pool {
		switch {
		case st.Loop:
			looping = append(looping, st.Name)
		case st.InBackoff:
			backoff = append(backoff, st.Name)
		}
	}
	d.log.Error("no upstream is left in service: a forwarding loop took out the last one; queries get SERVFAIL until a loop check no longer comes back or an upstream in backoff answers",
		zap.String("upstream", upstream), zap.Strings("looping", looping), zap.Strings("backoff", backoff))
}
