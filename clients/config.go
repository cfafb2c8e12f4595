package clients

import "github.com/nxdnsd/nxdnsd/config"

// FromConfig is the Config of a validated configuration's [clients]
// table, for New and Reload; the fields that are no keys stay zero (their
// defaults).
func FromConfig(c config.Clients) Config {
	static := make([]Static, 0, len(c.Static))
	for _, s := range c.Static {
		static = append(static, Static{Name: s.Name, Addrs: s.Addrs})
	}
	return Config{
		Static:        static,
		HostsFiles:    c.HostsFiles,
		LeasesFiles:   c.LeasesFiles,
		ReverseLookup: c.ReverseLookup,
	}
}
