package history

import (
	"time"

	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
)

// OpenSmallChunks opens the SQLite history at path ("" in memory) with
// sealed chunks of at most rows rows, so that tests of a few thousand
// rows read sealed chunks, chunks cut in two and small ones at once.
func OpenSmallChunks(path string, rows int) (*History, error) {
	s, err := openSQLite(path)
	if err != nil {
		return nil, err
	}
	s.rowsPerChunk = rows
	cfg := config.Default().History
	cfg.Path = path
	return start(s, cfg, zap.NewNop(), time.Now), nil
}

// OpenWithoutBudget opens the SQLite history cfg describes with a writer
// that spends as much time as it needs (no writerShare): for the
// benchmarks of its own speed and for generating big files.
func OpenWithoutBudget(cfg config.History) (*History, error) {
	s, err := openSQLite(cfg.Path)
	if err != nil {
		return nil, err
	}
	return startWith(s, cfg, zap.NewNop(), time.Now, options{noBudget: true}), nil
}

// WriteCPU is the CPU time the writer's batches took, on the clock of its
// budget (its thread's CPU time on Linux).
func WriteCPU(h *History) time.Duration { return time.Duration(h.writeCPU.Load()) }

// Rollups reports what the SQLite store's rollups hold: the closed hours
// kept, the keys of its table, and an estimate of their bytes (the
// entries' and keys' own, a map entry at 48 bytes, the chunk kept
// decoded).
func Rollups(h *History) (hours, keys int, bytes int64) {
	s, ok := h.st.(*sqliteStore)
	if !ok {
		return 0, 0, 0
	}
	r := &s.roll
	r.mu.Lock()
	defer r.mu.Unlock()
	const mapEntry = 48
	for _, hr := range r.hours {
		bytes += int64(len(hr.minutes)*numOutcomes*8) + mapEntry
		for _, l := range hr.lists {
			bytes += int64(len(l) * 8)
		}
	}
	for _, k := range r.keys.text {
		bytes += int64(len(k)) + 16 + 4 + mapEntry
	}
	counted := func(c *counts) {
		if c == nil {
			return
		}
		bytes += int64(len(c.minutes) * numOutcomes * 8)
		for l := range 2 {
			for k := range c.names[l] {
				bytes += int64(len(k)) + mapEntry
			}
			bytes += int64(len(c.ids[l])+len(c.keys[l])) * mapEntry
		}
	}
	for _, c := range r.open {
		counted(c)
	}
	for _, c := range r.smalls {
		counted(c)
	}
	counted(r.prefix)
	bytes += int64(cap(r.held.nb) + cap(r.held.cb) + cap(r.dense)*8 + cap(r.in))
	for _, v := range r.held.c.vals {
		bytes += int64(cap(v) * 8)
	}
	return len(r.hours), len(r.keys.ids), bytes
}
