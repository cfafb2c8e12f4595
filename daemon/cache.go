package daemon

import (
	"errors"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/query"
)

// newCache builds the answer cache of cache.enabled, warm from cache.path
// when a saved one is there (a missing file is a cold start; a damaged one,
// or one that is not a regular file, is logged and ignored; a malformed
// entry is skipped and logged), and shows it to the metrics. It returns nil when
// the cache is off.
func (d *Daemon) newCache() *cache.Cache {
	cc := d.cfg.Cache
	if !cc.Enabled {
		return nil
	}
	c := cache.New(cache.Config{
		MaxBytes:       cc.SizeMiB << 20,
		MinTTL:         cc.MinTTL(),
		MaxTTL:         cc.MaxTTL(),
		NegativeMaxTTL: cc.NegativeMaxTTL(),
		FailureTTL:     cc.FailureTTL(),
		StaleMaxAge:    d.staleMaxAge(),
	})
	if cc.Path != "" {
		ld, err := c.LoadFile(cc.Path, time.Now())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.log.Info("no saved cache: starting cold", zap.String("path", cc.Path))
		case err != nil:
			d.log.Warn("the saved cache is unusable: starting cold", zap.String("path", cc.Path), zap.Error(err))
		case ld.Skipped > 0:
			d.log.Warn("cache loaded; malformed entries in the file were skipped", zap.String("path", cc.Path),
				zap.Int("entries", ld.Stored), zap.Int("skipped", ld.Skipped), zap.Int("dropped", ld.Dropped))
		default:
			d.log.Info("cache loaded", zap.String("path", cc.Path), zap.Int("entries", ld.Stored), zap.Int("dropped", ld.Dropped))
		}
	}
	d.metrics.AttachCache(c)
	return c
}

// staleMaxAge is how long past expiry the cache keeps an answer: none
// without serve_stale.
func (d *Daemon) staleMaxAge() time.Duration {
	if !d.cfg.Cache.ServeStale {
		return 0
	}
	return d.cfg.Cache.StaleMaxAge()
}

// cacheConfig is the query path's view of the cache and cfg's policy for
// it, for a handler over pool.
func (d *Daemon) cacheConfig(cfg *config.Config, pool *actors.Pool) query.CacheConfig {
	if d.cache == nil {
		return query.CacheConfig{}
	}
	cc := cfg.Cache
	return query.CacheConfig{
		Cache:              d.cache,
		Prefetch:           cc.Prefetch,
		ServeStale:         cc.ServeStale,
		StaleAnswerTTL:     cc.StaleAnswerTTL(),
		StaleClientTimeout: cc.StaleClientTimeout(),
		AllDown:            pool.AllInBackoff,
		OnPrefetch:         d.metrics.Prefetch,
		MaxRefreshes:       refreshSlots(cfg.Upstreams),
	}
}

// refreshSlots bounds the cache's background refreshes: half the enabled
// upstreams' slots, at least one, so that the clients' own queries always
// have the other half.
func refreshSlots(ups []config.Upstream) int {
	n := 0
	for _, u := range ups {
		if u.IsEnabled() {
			n += u.Slots
		}
	}
	return max(n/2, 1)
}

// saveCache writes the cache to cache.path, for a warm restart.
func (d *Daemon) saveCache() {
	path := d.cfg.Cache.Path
	if d.cache == nil || path == "" {
		return
	}
	if err := d.cache.SaveFile(path, time.Now()); err != nil {
		d.log.Error("saving the cache", zap.String("path", path), zap.Error(err))
		return
	}
	d.log.Info("cache saved", zap.String("path", path), zap.Int("entries", d.cache.Entries()))
}
