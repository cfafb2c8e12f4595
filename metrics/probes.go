package metrics

import (
	"strconv"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/internal/promtext"
)

// The health probes' families (issue 14), read from the pool's Status at
// scrape time like the successes and failures: an upstream's actor counts
// its probes and keeps its smoothed RTT, so a reload that keeps the
// upstream keeps them too. Both are written with a HELP text of their own.

const (
	probesFamily = "nxdns_upstream_probes_total"
	probesHelp   = "Health probes of the upstream (a . NS query by its actor at start-up and when a backoff ends), by how they ended. Not counted in the attempt, success or failure series."

	srttFamily = "nxdns_upstream_srtt_seconds"
	srttHelp   = "Smoothed round-trip time of the upstream (RFC 6298, gain 1/8) from its answered queries and probes; 0 before the first answer."
)

// appendProbes appends nxdns_upstream_probes_total, one series per
// upstream and outcome (every one from start-up), and
// nxdns_upstream_srtt_seconds, one per upstream. status(i) is upstream
// i's Status (the zero Status before the pool is attached).
func appendProbes(b []byte, names []string, status func(int) actors.Status) []byte {
	b = promtext.AppendHelp(b, probesFamily, probesHelp, "counter")
	for i, name := range names {
		st := status(i)
		for _, o := range actors.Outcomes {
			b = append(b, probesFamily...)
			b = append(b, `{upstream="`...)
			b = append(b, escape(name)...)
			b = append(b, `",outcome="`...)
			b = append(b, o.String()...)
			b = append(b, `"} `...)
			b = strconv.AppendUint(b, st.Probes[o], 10)
			b = append(b, '\n')
		}
	}
	b = promtext.AppendHelp(b, srttFamily, srttHelp, "gauge")
	for i, name := range names {
		b = append(b, srttFamily...)
		b = append(b, `{upstream="`...)
		b = append(b, escape(name)...)
		b = append(b, `"} `...)
		b = strconv.AppendFloat(b, status(i).RTT.SRTT.Seconds(), 'g', -1, 64)
		b = append(b, '\n')
	}
	return b
}
