package daemon

import (
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
)

// probeHook hears every health probe once its outcome has been applied
// (actors.HealthPolicy.OnProbe).
type probeHook func(upstream string, o actors.Outcome, st actors.Status)

// probed is every pool's actors.HealthPolicy.OnProbe: it logs what a
// health probe found, then tells the test's hook, if any. It runs on the
// upstream's actor goroutine. Probes run at start-up and when a backoff
// ends, never on a healthy upstream, so these lines are few: an answer
// (the upstream is healthy, or healthy again) and a failure at info, a
// local error (no route from this host: nobody is blamed) at warn.
func (d *Daemon) probed(upstream string, o actors.Outcome, st actors.Status) {
	switch o {
	case actors.OutcomeAnswer:
		d.log.Info("upstream probe answered",
			zap.String("upstream", upstream), zap.Duration("srtt", st.RTT.SRTT))
	case actors.OutcomeExpired, actors.OutcomePeerFault:
		d.log.Info("upstream probe failed",
			zap.String("upstream", upstream), zap.Stringer("outcome", o),
			zap.Error(st.LastError), zap.Time("backoff_until", st.BackoffUntil))
	case actors.OutcomeLocalError:
		d.log.Warn("upstream probe found no way out of this host; nothing recorded",
			zap.String("upstream", upstream), zap.Time("backoff_until", st.BackoffUntil))
	default:
		d.log.Debug("upstream probe", zap.String("upstream", upstream), zap.Stringer("outcome", o))
	}
	if d.opts.onProbe != nil {
		d.opts.onProbe(upstream, o, st)
	}
}
