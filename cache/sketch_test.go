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
