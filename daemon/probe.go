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
// upstream's actor goroutine. Probes run at start-up, when a backoff ends
// and, while an upstream's last word is a local error, every backoff_ms,
// so these lines are few: an answer (the upstream is healthy, or healthy
// again) at info; a failure (the upstream goes into backoff, or stays)
// and a local error (no route from this host: nobody is blamed, and the
// network may be down) at warn. backoff_until is given only while there
// is a backoff.
func (d *Daemon) probed(upstream string, o actors.Outcome, st actors.Status) {
	switch o {
	case actors.OutcomeAnswer:
		d.log.Info("upstream probe answered",
			zap.String("upstream", upstream), zap.Duration("srtt", st.RTT.SRTT))
	case actors.OutcomeExpired, actors.OutcomePeerFault:
		d.log.Warn("upstream probe failed",
			zap.String("upstream", upstream), zap.Stringer("outcome", o),
			zap.Error(st.LastError), backoffUntil(st))
	case actors.OutcomeLocalError:
		d.log.Warn("upstream probe found no way out of this host; nothing recorded",
			zap.String("upstream", upstream), zap.Error(st.LastLocalError), backoffUntil(st))
	default:
		d.log.Debug("upstream probe", zap.String("upstream", upstream), zap.Stringer("outcome", o))
	}
	if d.opts.onProbe != nil {
		d.opts.onProbe(upstream, o, st)
	}
}

// backoffUntil is st's backoff_until field, or no field when st has no
// backoff (a zero time read as 0001-01-01 in the log).
func backoffUntil(st actors.Status) zap.Field {
	if st.BackoffUntil.IsZero() {
		return zap.Skip()
	}
	return zap.Time("backoff_until", st.BackoffUntil)
}
