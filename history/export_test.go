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
