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
