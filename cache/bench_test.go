package cache

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// benchKeys are n names with their answers, as the query path would have
// them: the name a string already, the answer bytes from an upstream.
func benchKeys(b *testing.B, n int) ([]Key, [][]byte) {
	b.Helper()
	keys := make([]Key, n)
	answers := make([][]byte, n)
	for i := range keys {
		name := sprintf("host%07d.example.com.", i)
		keys[i] = Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}
		answers[i] = answerFor(b, name, 3600)
	}
	return keys, answers
}

func benchCache(b *testing.B, keys []Key, answers [][]byte) *Cache {
	b.Helper()
	cfg := testConfig()
	cfg.MaxBytes = 16 << 20
	c := New(cfg)
	for i, k := range keys {
		if !c.Put(k, answers[i], t0) {
			b.Fatal("Put refused")
		}
	}
	return c
}

// BenchmarkGet is a hit on 1,000 names, on every core at once.
func BenchmarkGet(b *testing.B) {
	keys, answers := benchKeys(b, 1000)
	c := benchCache(b, keys, answers)
	now := t0.Add(time.Second)
	var next atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			if _, st := c.Get(keys[i%len(keys)], now); st != Fresh {
				b.Fatal(st)
			}
		}
	})
}

// BenchmarkHit is a whole hit: Get, then the answer for the client with
// its ID, question and aged TTLs, on every core at once.
func BenchmarkHit(b *testing.B) {
	keys, answers := benchKeys(b, 1000)
	c := benchCache(b, keys, answers)
	now := t0.Add(time.Second)
	var next atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 1232)
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			j := i % len(keys)
			h, _ := c.Get(keys[j], now)
			q := answers[j][headerLen:]
			buf = h.AppendAnswer(buf[:0], uint16(i), q[:len(keys[j].Name)+1+4], now, 0)
		}
	})
}

// BenchmarkGetMiss is a lookup of a name the cache does not have.
func BenchmarkGetMiss(b *testing.B) {
	keys, answers := benchKeys(b, 1000)
	c := benchCache(b, keys[:500], answers[:500])
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.Get(keys[500+i%500], t0)
	}
}

// BenchmarkPut stores answers for new names in a cache with room: the
// miss path's cost.
func BenchmarkPut(b *testing.B) {
	const n = 1 << 16
	keys, answers := benchKeys(b, n)
	cfg := testConfig()
	cfg.MaxBytes = 64 << 20
	c := New(cfg)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%n == 0 && i > 0 {
			b.StopTimer()
			c = New(cfg)
			b.StartTimer()
		}
		c.Put(keys[i%n], answers[i%n], t0)
	}
}

// BenchmarkPutReplace stores a new answer over a fresh one (a refresh).
func BenchmarkPutReplace(b *testing.B) {
	keys, answers := benchKeys(b, 1000)
	c := benchCache(b, keys, answers)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.Put(keys[i%len(keys)], answers[i%len(keys)], t0)
	}
}

// BenchmarkPutFlood is a one-off name's miss path in a full cache: the
// lookup, then a Put that admission turns away.
func BenchmarkPutFlood(b *testing.B) {
	const n = 1 << 16
	keys, answers := benchKeys(b, n)
	cfg := testConfig()
	cfg.MaxBytes = 1 << 20
	c := New(cfg)
	for i := range n / 4 { // fills it, the first ones asked twice
		c.Get(keys[i], t0)
		c.Get(keys[i], t0)
		c.Put(keys[i], answers[i], t0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := keys[n/4+i%(n-n/4)]
		c.Get(k, t0)
		c.Put(k, answers[n/4+i%(n-n/4)], t0)
	}
}
