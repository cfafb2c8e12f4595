package actors

import "time"

// RTT is an upstream's smoothed round-trip time, as RFC 6298 (section 2)
// computes TCP's: from every answered attempt and probe, with the
// recommended gains alpha = 1/8 and beta = 1/4. An operator reads it to
// see which upstream is slowing down before it fails. It is a pure value;
// the upstream's actor owns the live one.
type RTT struct {
	SRTT    time.Duration // smoothed round-trip time
	RTTVar  time.Duration // round-trip time variation
	Samples uint64        // answers measured; zero: no estimate yet
}

// Sample folds in r, the duration of one answered exchange.
func (e RTT) Sample(r time.Duration) RTT {
	if e.Samples == 0 {
		// RFC 6298 (2.2): the first measurement.
		e.SRTT, e.RTTVar = r, r/2
	} else {
		// RFC 6298 (2.3): RTTVAR first, from the SRTT before this sample.
		delta := e.SRTT - r
		if delta < 0 {
			delta = -delta
		}
		e.RTTVar = e.RTTVar - e.RTTVar/4 + delta/4 // (1 - 1/4) RTTVAR + 1/4 |SRTT - R'|
		e.SRTT = e.SRTT - e.SRTT/8 + r/8           // (1 - 1/8) SRTT + 1/8 R'
	}
	e.Samples++
	return e
}
