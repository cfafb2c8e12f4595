package history

import (
	"context"
	"time"
)

// store is where a History keeps its rows: a SQLite file of this
// replica's (sqlite.go), or a PostgreSQL database a fleet shares (spec
// section 16, postgres.go). The writer
// goroutine alone calls write and maintain; the read methods are called
// by HTTP handlers concurrently with it and with each other.
type store interface {
	// write stores rows, one transaction for the batch. An error means
	// none of them was stored.
	write(rows []Row) error

	// maintain enforces retention by age (rows before cutoff) and size
	// (maxBytes), doing at most a bounded chunk of work per call so that
	// no lock is held for long; it reports whether more is left to do.
	maintain(cutoff time.Time, maxBytes int64) (more bool, err error)

	// size is the database's size in bytes, and used the bytes of its
	// pages in use, as of the last write or maintain.
	size() int64
	used() int64

	// The reads. instance ("" any) narrows a shared store to one
	// replica's rows; a store of this replica's alone ignores it (the
	// History answers for another instance itself).
	rows(ctx context.Context, f filter) (page, error)
	top(ctx context.Context, what, instance string, from, to time.Time, limit int) ([]count, error)
	timeline(ctx context.Context, instance string, from, to time.Time, step time.Duration) ([]bucket, error)

	close() error
}

// filter selects the rows of GET /api/history: every field set must
// match.
type filter struct {
	Instance string    // "": any
	Client   string    // an address or a client name
	Name     string    // a substring of the name, case-insensitive
	Type     uint16    // 0: any
	Source   string    // "": any
	Rcode    int       // -1: any
	Upstream string    // "": any
	From, To time.Time // [From, To); zero: unbounded
	Limit    int
	Cursor   int64 // rows before this key; 0: from the newest
}

// entry is one row (its key the cursor) as the API returns it.
type entry struct {
	key        int64
	Time       time.Time
	Instance   string // "" in a store of this replica's alone
	Client     string // "" unknown
	ClientName string
	Proto      string
	QName      string // "" no question
	QType      uint16
	Rcode      int
	Source     string
	Upstream   string
	Duration   time.Duration
	List       string
}

// page is one page of rows, newest first; Next is the cursor of the page
// after, 0 when there is none.
type page struct {
	Rows []entry
	Next int64
}

// pageOf is the page of the first limit of rows, newest first, read one
// more than limit to know whether a page comes after.
func pageOf(rows []entry, limit int) page {
	p := page{Rows: rows}
	if len(rows) > limit {
		p.Rows = rows[:limit]
		p.Next = p.Rows[limit-1].key
	}
	return p
}

// count is one line of GET /api/stats/top.
type count struct {
	Key   string
	Count int64
}

// bucket is one bucket of GET /api/stats/timeline.
type bucket struct {
	Time time.Time
	N    [numOutcomes]int64
}
