package config

import (
	"os"
	"time"
)

// History is the [history] table: the query history (spec section 12).
type History struct {
	Enabled       bool   `toml:"enabled"`
	Path          string `toml:"path"`           // SQLite database file; "" = in memory (at most MaxHistoryMemoryMiB)
	RetentionDays int    `toml:"retention_days"` // rows older than this are deleted
	MaxMiB        int    `toml:"max_mib"`        // the database is kept under this size (oldest rows go first)
}

// Limits of the [history] keys.
const (
	// DefaultHistoryRetentionDays and DefaultHistoryMaxMiB are the
	// spec's defaults: a week of a busy household fits 256 MiB with room.
	DefaultHistoryRetentionDays = 7
	DefaultHistoryMaxMiB        = 256

	// MaxHistoryRetentionDays bounds history.retention_days: ten years
	// is past any board's disk, and far from overflowing a duration.
	MaxHistoryRetentionDays = 3650

	// MaxHistoryMiB bounds history.max_mib: 1 TiB.
	MaxHistoryMiB = 1 << 20

	// MaxHistoryMemoryMiB is the most an in-memory history (path "")
	// holds, whatever max_mib says: it is the process's memory.
	MaxHistoryMemoryMiB = 32
)

func defaultHistory() History {
	return History{Enabled: true, RetentionDays: DefaultHistoryRetentionDays, MaxMiB: DefaultHistoryMaxMiB}
}

// Retention is retention_days as a duration.
func (h History) Retention() time.Duration { return time.Duration(h.RetentionDays) * 24 * time.Hour }

// MaxBytes is the size the database is kept under: max_mib, and at most
// MaxHistoryMemoryMiB in memory.
func (h History) MaxBytes() int64 {
	mib := h.MaxMiB
	if h.Path == "" {
		mib = min(mib, MaxHistoryMemoryMiB)
	}
	return int64(mib) << 20
}

// history checks [history]. A file that cannot be opened is not a
// problem of the configuration: history is then off and DNS served
// (spec section 12); a path naming a directory is a typo.
func (ck *checker) history(h History) {
	ck.inRange("history.retention_days", h.RetentionDays, 1, MaxHistoryRetentionDays)
	ck.inRange("history.max_mib", h.MaxMiB, 1, MaxHistoryMiB)
	if h.Path != "" {
		if fi, err := os.Stat(h.Path); err == nil && fi.IsDir() {
			ck.add("history.path", "%q is a directory; name a file in it", h.Path)
		}
	}
}
