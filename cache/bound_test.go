package cache

import (
	"testing"
	"time"

	"github.com/miekg/dns"
	"pgregory.net/rapid"
)

// TestBoundProperty drives a cache with random puts, failures, lookups
// and clock steps, and checks after each that it holds no more than
// MaxBytes, that its counters agree with its shards, and that an answer
// Put reports stored is there at once.
func TestBoundProperty(t *testing.T) {
	t.Parallel()
	names := make([]string, 64)
	for i := range names {
		names[i] = sprintf("n%d.example.", i)
	}
	rapid.Check(t, func(t *rapid.T) {
		cfg := testConfig()
		cfg.MaxBytes = rapid.IntRange(512, 64<<10).Draw(t, "maxBytes")
		cfg.StaleMaxAge = time.Duration(rapid.IntRange(0, 100).Draw(t, "stale")) * time.Second
		c := New(cfg)
		now := t0
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			i := rapid.IntRange(0, len(names)-1).Draw(t, "name")
			k := Key{Name: names[i], Type: dns.TypeTXT, Class: dns.ClassINET, DO: rapid.Bool().Draw(t, "do")}
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				m := msg{name: names[i], qtype: dns.TypeTXT}
				ttl := rapid.IntRange(0, 100).Draw(t, "ttl")
				for range rapid.IntRange(1, 8).Draw(t, "records") {
					m.an = append(m.an, sprintf(`%s %d IN TXT "%s"`, names[i], ttl,
						rapid.StringMatching(`[a-z]{0,200}`).Draw(t, "txt")))
				}
				if c.Put(k, m.pack(t), now) {
					if _, st := c.Get(k, now); st != Fresh {
						t.Fatalf("stored, then %v", st)
					}
				}
			case 1:
				c.PutFailure(k, now)
			case 2:
				c.Get(k, now)
			case 3:
				now = now.Add(time.Duration(rapid.IntRange(0, 60).Draw(t, "step")) * time.Second)
			}
			checkShards(t, c, cfg.MaxBytes)
		}
	})
}

// checkShards checks the cache's counters against its shards, and the
// bound.
func checkShards(t *rapid.T, c *Cache, maxBytes int) {
	var bytes, entries int
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		sum := 0
		for j, sl := range s.items {
			sum += sl.it.cost()
			if s.index[sl.h] != int32(j) {
				t.Fatalf("shard %d: index of item %d is %d", i, j, s.index[sl.h])
			}
		}
		if sum != s.bytes || len(s.index) != len(s.items) || s.bytes > c.budget {
			t.Fatalf("shard %d: %d bytes counted, %d held, budget %d; %d indexed, %d items",
				i, s.bytes, sum, c.budget, len(s.index), len(s.items))
		}
		bytes += sum
		entries += len(s.items)
		s.mu.RUnlock()
	}
	if int64(bytes) != c.Bytes() || entries != c.Entries() || c.Bytes() > int64(maxBytes) {
		t.Fatalf("Bytes %d, Entries %d; shards hold %d bytes, %d entries; bound %d",
			c.Bytes(), c.Entries(), bytes, entries, maxBytes)
	}
}
