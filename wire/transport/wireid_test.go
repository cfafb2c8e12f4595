package transport

import (
	"sync"
	"testing"
)

// Wire IDs cover all 16 bits, allocate nothing, and are drawn safely from
// many goroutines at once (the race detector watches the generators).
// Not parallel: AllocsPerRun counts the whole process.
func TestNewWireID(t *testing.T) {
	// Under the race detector sync.Pool drops some of what it is given
	// back, on purpose, and each drop seeds a new generator.
	if !raceEnabled {
		if n := testing.AllocsPerRun(1000, func() { newWireID() }); n != 0 {
			t.Errorf("newWireID allocates %v times per ID, want 0", n)
		}
	}
	const goroutines, each = 8, 4096
	var mu sync.Mutex
	var or, and uint16 = 0, 0xffff
	seen := map[uint16]int{}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			ids := make([]uint16, each)
			for i := range ids {
				ids[i] = newWireID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				or, and = or|id, and&id
				seen[id]++
			}
		})
	}
	wg.Wait()
	if or != 0xffff || and != 0 {
		t.Errorf("over %d IDs some bits never changed: OR %#04x, AND %#04x", goroutines*each, or, and)
	}
	// 32,768 draws from 65,536 values leave about 25,800 distinct; a
	// generator shared wrongly between goroutines repeats whole runs.
	if len(seen) < 24000 {
		t.Errorf("%d distinct IDs in %d, want about 25,800", len(seen), goroutines*each)
	}
}

// BenchmarkNewWireID is what a query's random wire ID costs, from one
// goroutine and from every core at once.
func BenchmarkNewWireID(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			newWireID()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				newWireID()
			}
		})
	})
}
