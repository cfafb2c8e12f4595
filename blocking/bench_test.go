package blocking

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nxdnsd/nxdnsd/blocking/blocktest"
	"github.com/nxdnsd/nxdnsd/internal/cputime/cputimetest"
)

// The acceptance figures of issue 27 (BENCHMARKS.md, "Blocking: the rule
// set"), against a generated list of 1,000,000 rules: 80 % exact names
// (hosts lines and plain domains), 20 % ||x^, and 1,000 @@||x^ on top.
const (
	benchRules = 1_000_000
	benchAllow = 1_000
)

// benchList writes the generated list to a file of the benchmark's and
// returns its path and some names of each kind.
func benchList(b *testing.B) (string, blocktest.List) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "1m.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	l, err := blocktest.New(27).WriteList(f, blocktest.Mix{Rules: benchRules, Allow: benchAllow}, 4096)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	return path, l
}

func benchManager(b *testing.B, path string) *Manager {
	b.Helper()
	return NewManager(Options{Config: blockingConfig(b, fmt.Sprintf("[[blocking.lists]]\nname = \"1m\"\nsource = %q\n", path))})
}

// BenchmarkLoad1M: the list read from its file, parsed and in force (Start
// returns with it published), per iteration. Run with -cpu=1: the parse
// is one goroutine, the garbage collector may use the other cores.
func BenchmarkLoad1M(b *testing.B) {
	path, _ := benchList(b)
	cpu := cputimetest.Start(b)
	n := 0
	for b.Loop() {
		m := benchManager(b, path)
		m.Start(context.Background())
		if st := m.Lists()[0]; st.Rules < benchRules*9/10 {
			b.Fatalf("%+v", st)
		}
		m.Close()
		n++
	}
	cpu.Report(b, n)
}

// BenchmarkDecide1M: one decision for a five-label name against the 1M
// rules, cycling through 4,096 names: a quarter blocked by a ||x^ rule, a
// quarter allowed by @@||x^, a quarter under exact rules, a quarter
// unrelated (blocktest.Lookups).
func BenchmarkDecide1M(b *testing.B) {
	path, l := benchList(b)
	m := benchManager(b, path)
	m.Start(context.Background())
	defer m.Close()
	names := blocktest.New(28).Lookups(l, 4096)
	wires := make([][]byte, len(names))
	var blocked, allowed int
	for i, n := range names {
		wires[i] = wire(b, n)
		d := m.Engine().Decide(client1, nil, wires[i])
		if d.Blocked {
			blocked++
		}
		if d.Allowed {
			allowed++
		}
	}
	if blocked < len(names)/4 || allowed < len(names)/4 {
		b.Fatalf("of %d lookups %d blocked, %d allowed: the mix is not what it says", len(names), blocked, allowed)
	}
	e := m.Engine()
	b.ReportAllocs()
	cpu := cputimetest.Start(b)
	i := 0
	for b.Loop() {
		e.Decide(client1, nil, wires[i&4095])
		i++
	}
	cpu.Report(b, i)
}

// BenchmarkMemory1M reports the rule set's heap in force (HeapAlloc after
// a collection, with and without it) and the live heap at a refresh's
// peak: the new copy built, the old one still in force.
func BenchmarkMemory1M(b *testing.B) {
	path, _ := benchList(b)
	for b.Loop() {
		before := heapAfterGC()
		m := benchManager(b, path)
		var peak uint64
		m.atPeak = func() { peak = max(peak, heapAfterGC()) }
		m.Start(context.Background())
		steady := heapAfterGC()
		if err := m.Refresh(context.Background(), "1m"); err != nil {
			b.Fatal(err)
		}
		after := heapAfterGC()
		m.mu.Lock()
		approx := m.lists[0].set.bytes()
		m.mu.Unlock()
		m.Close()
		b.ReportMetric(float64(steady-before)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(peak-before)/(1<<20), "refresh-peak-MiB")
		b.ReportMetric(float64(peak-before)/float64(steady-before), "peak/steady")
		b.ReportMetric(float64(after-before)/(1<<20), "after-refresh-MiB")
		b.ReportMetric(float64(approx)/(1<<20), "arrays-MiB")
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second one frees what the first one's finalisers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSplit: the hashing of a five-label name's suffixes alone.
func BenchmarkSplit(b *testing.B) {
	w := wire(b, "Www.Pixel3.Trackers-Example.co.uk.")
	var ls labels
	var hashes [shortLabels]uint64
	cpu := cputimetest.Start(b)
	n := 0
	for b.Loop() {
		_ = ls.split(w, hashes[:])
		n++
	}
	cpu.Report(b, n)
}

// BenchmarkYardstickMap5 is a yardstick for Decide1M on a shared machine:
// five lookups of random keys in a Go map of 1M uint64 keys, the least
// any hashed set could cost for a five-label name. Comparing the two on
// one run says what the set itself adds.
func BenchmarkYardstickMap5(b *testing.B) {
	m := make(map[uint64]struct{}, benchRules)
	for i := range uint64(benchRules) {
		m[i*0x9e3779b97f4a7c15] = struct{}{}
	}
	keys := make([]uint64, 4096*5)
	for i := range keys {
		keys[i] = uint64(i*7919) * 0x9e3779b97f4a7c15 // half in the map
	}
	cpu := cputimetest.Start(b)
	n, found := 0, 0
	for b.Loop() {
		for _, k := range keys[(n&4095)*5:][:5] {
			if _, ok := m[k]; ok {
				found++
			}
		}
		n++
	}
	cpu.Report(b, n)
	if found == 0 {
		b.Fatal("no key found")
	}
}

// BenchmarkDecideHits1M is the decision nxdnsbench's hits row asks of the
// 1M rules for every query: 1,000 names under bench.example, none
// blocked, over and over (so the lines of the table and filter they
// touch stay in the caches, as on a busy resolver's hit path).
func BenchmarkDecideHits1M(b *testing.B) {
	path, _ := benchList(b)
	m := benchManager(b, path)
	m.Start(context.Background())
	defer m.Close()
	wires := make([][]byte, 1000)
	for i := range wires {
		wires[i] = wire(b, fmt.Sprintf("h%d.bench.example.", i))
		if d := m.Engine().Decide(client1, nil, wires[i]); d.Blocked || d.Allowed {
			b.Fatalf("%s: %+v", wires[i], d)
		}
	}
	e := m.Engine()
	b.ReportAllocs()
	cpu := cputimetest.Start(b)
	i := 0
	for b.Loop() {
		e.Decide(client1, nil, wires[i%len(wires)])
		i++
	}
	cpu.Report(b, i)
}
