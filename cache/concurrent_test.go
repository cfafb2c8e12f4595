package cache

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestConcurrent runs lookups, stores, failures, claims and a save at
// once, for the race detector, and checks the counters after.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxBytes = 64 << 10 // small: evictions too
	c := New(cfg)
	const names = 300
	keys := make([]Key, names)
	answers := make([][]byte, names)
	for i := range keys {
		name := sprintf("c%d.example.", i)
		keys[i] = Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}
		answers[i] = answerFor(t, name, 60)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			buf := make([]byte, 0, 512)
			for i := range 3000 {
				j := (i*7 + g*13) % names
				now := t0.Add(time.Duration(i) * 50 * time.Millisecond)
				h, st := c.Get(keys[j], now)
				switch st {
				case Miss:
					if i%5 == 0 {
						c.PutFailure(keys[j], now)
					} else {
						c.Put(keys[j], answers[j], now)
					}
				case Fresh, Stale:
					buf = h.AppendAnswer(buf[:0], 1, nil, now, 0)
					if h.PrefetchDue(now) && h.ClaimRefresh() {
						if i%2 == 0 {
							c.Put(keys[j], answers[j], now)
						} else {
							h.Release()
						}
					}
				}
			}
		})
	}
	wg.Go(func() {
		path := filepath.Join(t.TempDir(), "cache")
		for range 5 {
			if err := c.SaveFile(path, t0); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	var entries int
	for i := range c.shards {
		entries += len(c.shards[i].items)
	}
	if c.Entries() != entries || c.Bytes() > int64(cfg.MaxBytes) {
		t.Fatalf("Entries %d of %d, Bytes %d", c.Entries(), entries, c.Bytes())
	}
}
