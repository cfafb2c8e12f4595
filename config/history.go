package config

import (
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// History is the [history] table: the query history (spec section 12).
type History struct {
	Enabled       bool   `toml:"enabled"`
	Path          string `toml:"path"`           // SQLite database file; "" = in memory (at most MaxHistoryMemoryMiB)
	RetentionDays int    `toml:"retention_days"` // rows older than this are deleted
	MaxMiB        int    `toml:"max_mib"`        // the database is kept under this size (oldest rows go first)

	// Postgres is a PostgreSQL connection string (a postgres:// URL or
	// key=value pairs): the fleet's shared history (spec section 16)
	// instead of the SQLite file. "" = SQLite. It may hold a password:
	// say it through RedactPostgres.
	Postgres string `toml:"postgres"`
	// Instance is this replica's name in a shared history; "" = the
	// host name (InstanceName).
	Instance string `toml:"instance"`
}

// MaxInstanceLen bounds history.instance: a name, not a document.
const MaxInstanceLen = 253

// InstanceName is history.instance, or the host name when it is empty
// ("nxdnsd" when even that is unknown).
func (h History) InstanceName() string {
	if h.Instance != "" {
		return h.Instance
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		return name
	}
	return "nxdnsd"
}

// RedactPostgres is a connection string with its password left out, for
// logs and messages: in a URL the user info's password, in key=value form
// the password pair's value (and a password= in a URL's query).
func RedactPostgres(s string) string {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			if i := strings.LastIndex(s, "@"); i >= 0 {
				return "…" + s[i:]
			}
			return "…"
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

// kvPassword is a password pair of a key=value connection string, quoted
// ('…', with \' and \\ escapes) or not.
var kvPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

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
	if h.Postgres != "" {
		if _, err := pgconn.ParseConfig(h.Postgres); err != nil {
			// pgconn's message may quote the string (a URL's parse
			// error does) and its password: not repeated.
			ck.add("history.postgres", "%q is not a PostgreSQL connection string (a postgres:// URL or key=value pairs)", RedactPostgres(h.Postgres))
		}
	}
	if len(h.Instance) > MaxInstanceLen {
		ck.add("history.instance", "%d bytes is longer than %d", len(h.Instance), MaxInstanceLen)
	} else if strings.ContainsFunc(h.Instance, func(r rune) bool { return r < ' ' || r == 0x7f || r == utf8.RuneError }) {
		ck.add("history.instance", "%q holds control characters or invalid UTF-8", h.Instance)
	}
}
