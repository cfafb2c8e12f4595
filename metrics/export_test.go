package metrics

// Names the tests use that production does not.

// AttachPool makes the scrape read p, the pool of Config.Upstreams, as
// the daemon's UsePool does with the first generation's upstreams.
func (m *Metrics) AttachPool(p Pool) { m.UsePool(p, m.first) }
