package history_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	_ "modernc.org/sqlite"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
)

// A file that is not a database (garbage), or a database cut short
// (truncated), is renamed aside with its contents kept, logged at error
// level, and a new history is created in its place that takes rows.
// A file that was not closed cleanly (a crash, a power cut) gets SQLite's
// quick_check, which finds a page overwritten in the middle; SQLite finds
// a file cut short by itself.
// Mutation check: dropping quickCheck lets the overwritten file open, and
// the test fails (no rename).
func TestDamagedFileRenamedAside(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string) []byte
	}{
		{"garbage", func(t *testing.T, path string) []byte {
			b := bytes.Repeat([]byte("this is not a database\n"), 500)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"truncated", func(t *testing.T, path string) []byte {
			h := open(t, path)
			for i := range 3000 {
				h.Record(history.Row{Time: time.Now(), QName: "n" + strings.Repeat("x", i%40) + ".example.", QType: 1, Source: "pool", Upstream: "quad9"})
				if i%1000 == 0 {
					h.Sync()
				}
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = b[:len(b)*2/3]
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"page overwritten, not closed cleanly", func(t *testing.T, path string) []byte {
			h := open(t, path)
			for i := range 3000 {
				h.Record(history.Row{Time: time.Now(), QName: "n" + strings.Repeat("y", i%40) + ".example.", QType: 1, Source: "cache"})
				if i%1000 == 0 {
					h.Sync()
				}
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`UPDATE meta SET value = 0 WHERE key = 'clean'`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			copy(b[len(b)/2:], bytes.Repeat([]byte{0xa5}, 3*4096))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"another program's database", func(t *testing.T, path string) []byte {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, _ := os.ReadFile(path)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "history.db")
			content := tc.make(t, path)
			core, logs := observer.New(zapcore.ErrorLevel)
			cfg := config.Default().History
			cfg.Path = path
			h, err := history.Open(cfg, zap.New(core))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer h.Close()
			asides, _ := filepath.Glob(path + ".damaged-*")
			if len(asides) != 1 || strings.Contains(asides[0], "-wal") {
				t.Fatalf("renamed aside: %v, want one file", asides)
			}
			if got, _ := os.ReadFile(asides[0]); !bytes.Equal(got, content) {
				t.Errorf("the file renamed aside is not the damaged file")
			}
			if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "damaged") {
				t.Errorf("logged at error level: %v", logs.All())
			}
			h.Record(history.Row{Time: time.Now(), QName: "after.example.", QType: 1})
			h.Sync()
			if h.Rows() != 1 {
				t.Errorf("the new history wrote %d rows, want 1", h.Rows())
			}
		})
	}
}

// A file that cannot be opened is left as it is: Open reports
// ErrUnavailable and renames nothing. A lock held by another process
// (here another connection, in an exclusive transaction), and a path
// under a file.
func TestUnopenableFileLeftAlone(t *testing.T) {
	t.Parallel()
	t.Run("locked", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "history.db")
		h := open(t, path)
		h.Record(history.Row{Time: time.Now(), QName: "a.example.", QType: 1})
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`PRAGMA locking_mode = EXCLUSIVE`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`BEGIN EXCLUSIVE`); err != nil {
			t.Fatal(err)
		}
		defer db.Exec(`ROLLBACK`) //nolint:errcheck
		cfg := config.Default().History
		cfg.Path = path
		h, err = history.Open(cfg, zap.NewNop())
		if !errors.Is(err, history.ErrUnavailable) {
			if h != nil {
				h.Close()
			}
			t.Fatalf("Open of a locked file: %v, want ErrUnavailable", err)
		}
		if asides, _ := filepath.Glob(path + ".damaged-*"); len(asides) != 0 {
			t.Errorf("renamed aside: %v", asides)
		}
	})
	t.Run("under a file", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "plain")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default().History
		cfg.Path = filepath.Join(file, "history.db")
		if h, err := history.Open(cfg, zap.NewNop()); !errors.Is(err, history.ErrUnavailable) {
			if h != nil {
				h.Close()
			}
			t.Fatalf("Open: %v, want ErrUnavailable", err)
		}
		if b, _ := os.ReadFile(file); string(b) != "x" {
			t.Errorf("the file in the way was changed")
		}
	})
}
