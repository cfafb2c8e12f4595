package cache

import (
	"math/rand/v2"
	"testing"
)

// TestSketch: counts go up to 15 and stay there, the period's end halves
// them, and a hash never counted estimates at most 1 (mostly).
func TestSketch(t *testing.T) {
	t.Parallel()
	var s sketch
	s.init(1 << 20)
	rng := rand.New(rand.NewPCG(5, 6))
	hot := rng.Uint64()
	for i := range 20 {
		s.increment(hot)
		if want := uint8(min(i+1, 15)); s.frequency(hot) != want {
			t.Fatalf("after %d increments: %d", i+1, s.frequency(hot))
		}
	}
	// Fill the period with other hashes: the halving takes hot to 7.
	for s.frequency(hot) == 15 {
		s.increment(rng.Uint64())
	}
	if f := s.frequency(hot); f != 7 {
		t.Fatalf("after halving: %d, want 7", f)
	}
	// Right after a halving the sketch is at its fullest: a period's
	// additions, one per counter, halved.
	low := 0
	for range 1000 {
		if s.frequency(rng.Uint64()) <= 1 {
			low++
		}
	}
	if low < 950 {
		t.Fatalf("only %d of 1000 new hashes estimate 0 or 1", low)
	}
}

// A flood of names asked once, through a full cache, leaves the counters
// alone: the doorkeeper takes each name's first lookup, so that nearly
// every one estimates 1 when its answer is offered, and the admission
// turns it away without sampling victims. Without the doorkeeper, 65 %
// of such names estimated 2 or 3 (a million names, 16 MiB).
func TestOneOffNamesEstimateOne(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxBytes = 2 << 20
	c := New(cfg)
	const n = 150_000 // about 20 periods of the sketch
	firstSight := 0
	for i := range n {
		name := sprintf("once%07d.example.com.", i)
		k := Key{Name: name, Type: 1, Class: 1}
		c.Get(k, t0)
		if c.sketch.frequency(c.hash(k)) <= 1 {
			firstSight++
		}
		c.Put(k, answerFor(t, name, 3600), t0)
	}
	if c.Entries() == 0 || c.Bytes() < int64(cfg.MaxBytes)*9/10 {
		t.Fatalf("the cache did not fill: %d entries, %d bytes", c.Entries(), c.Bytes())
	}
	if share := float64(firstSight) / n; share < 0.9 {
		t.Errorf("%.2f of the one-off names estimated 1 at their Put, want at least 0.9", share)
	}
}
