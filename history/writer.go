package history

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dictCap bounds each dictionary cache of the writer: a busy network's
// popular names fit, the one-off names that would not are looked up.
const dictCap = 1 << 14

// writer is the write side of sqliteStore: prepared statements and
// dictionary caches, owned by the writer goroutine.
type writer struct {
	s *sqliteStore

	insRow, nameID, insName, clientID, insClient, labelID, insLabel *sql.Stmt
	addMinute, addTop, addSeen                                      *sql.Stmt

	names   map[string]int64
	clients map[clientKey]int64
	labels  map[string]int64

	// Counters of the batch being written, reused.
	minutes map[[2]int64]int64 // minute, outcome
	tops    map[[3]int64]int64 // what, hour, key
	seen    map[[3]int64]int64 // what, key, minute

	// State of maintain.
	trimming  bool     // past the high water mark, until under the low one
	sweeping  bool     // rows were deleted: sweep the dictionaries
	sweepFrom [3]int64 // the next id to sweep in names, clients, labels
}

type clientKey struct{ addr, name string }

func newWriter(s *sqliteStore) (*writer, error) {
	wr := &writer{
		s:       s,
		names:   make(map[string]int64),
		clients: make(map[clientKey]int64),
		labels:  make(map[string]int64),
		minutes: make(map[[2]int64]int64),
		tops:    make(map[[3]int64]int64),
		seen:    make(map[[3]int64]int64),
	}
	stmts := []struct {
		p   **sql.Stmt
		sql string
	}{
		{&wr.insRow, `INSERT INTO q (id, name, client, qtype, flags, upstream, list, dur) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&wr.nameID, `SELECT id FROM names WHERE name = ?`},
		{&wr.insName, `INSERT INTO names (name) VALUES (?)`},
		{&wr.clientID, `SELECT id FROM clients WHERE addr = ? AND name = ?`},
		{&wr.insClient, `INSERT INTO clients (addr, name) VALUES (?, ?)`},
		{&wr.labelID, `SELECT id FROM labels WHERE text = ?`},
		{&wr.insLabel, `INSERT INTO labels (text) VALUES (?)`},
		{&wr.addMinute, `INSERT INTO minutes (minute, outcome, n) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n`},
		{&wr.addTop, `INSERT INTO tops (what, hour, key, n) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n`},
		{&wr.addSeen, `INSERT INTO seen (what, key, minute, n) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n`},
	}
	for _, st := range stmts {
		p, err := s.conn.PrepareContext(context.Background(), st.sql)
		if err != nil {
			wr.close()
			return nil, err
		}
		*st.p = p
	}
	return wr, nil
}

func (wr *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{wr.insRow, wr.nameID, wr.insName, wr.clientID, wr.insClient, wr.labelID, wr.insLabel, wr.addMinute, wr.addTop, wr.addSeen} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// forget empties the dictionary caches: after entries were deleted, a
// cached id may name nothing.
func (wr *writer) forget() {
	clear(wr.names)
	clear(wr.clients)
	clear(wr.labels)
}

const (
	usPerMinute = 60_000_000
	usPerHour   = 3600_000_000
	durUnit     = 10_000 // ns: durations are stored in 10 µs units (duration_ms to two decimals)
)

// maxKeyTries bounds the search for a free microsecond for one row.
const maxKeyTries = 1000

func (s *sqliteStore) write(rows []Row) (err error) {
	wr := s.wr
	defer func() {
		if err != nil {
			// Ids added by the transaction rolled back name nothing, and
			// its counters were not stored.
			wr.forget()
			clear(wr.minutes)
			clear(wr.tops)
			clear(wr.seen)
		}
	}()
	// Keys in arrival order, so that the rows go into the table's last
	// pages in order.
	slices.SortFunc(rows, func(a, b Row) int { return a.Time.Compare(b.Time) })
	tx, err := s.begin()
	if err != nil {
		return err
	}
	defer tx.rollback()
	ins := wr.insRow
	last := int64(-1 << 62)
	for i := range rows {
		r := &rows[i]
		var name any
		if r.QName != "" || r.QType != 0 {
			id, err := wr.dict(tx, wr.names, strings.ToLower(r.QName), wr.nameID, wr.insName)
			if err != nil {
				return err
			}
			name = id
		}
		client, err := wr.client(tx, r)
		if err != nil {
			return err
		}
		var upstream, list any
		var upID, listID int64 = -1, -1
		if r.Upstream != "" {
			if upID, err = wr.dict(tx, wr.labels, r.Upstream, wr.labelID, wr.insLabel); err != nil {
				return err
			}
			upstream = upID
		}
		if r.List != "" {
			if listID, err = wr.dict(tx, wr.labels, r.List, wr.labelID, wr.insLabel); err != nil {
				return err
			}
			list = listID
		}
		src, proto := sourceCode(r.Source), protoCode(r.Proto)
		f := flags(proto, src, r.Rcode)
		dur := int64(r.Duration / durUnit)
		key := max(s.key(r.Time), last+1) // sorted: a tie within the batch moves by 1 µs
		// A row of an earlier batch may hold this microsecond: the next
		// free one is near (rows are microseconds apart at most rates).
		for try := 0; ; try++ {
			_, err = ins.Exec(key, name, client, int64(r.QType), f, upstream, list, dur)
			if !isConstraint(err) || try == maxKeyTries {
				break
			}
			key++
		}
		if err != nil {
			return err
		}
		last = key
		minute, hour := floorDiv(key, usPerMinute), floorDiv(key, usPerHour)
		wr.minutes[[2]int64{minute, int64(outcome(src, r.Rcode))}]++
		if id, ok := name.(int64); ok {
			wr.tops[[3]int64{topDomains, hour, id}]++
			if src == sourceCode("blocked") {
				wr.tops[[3]int64{topBlocked, hour, id}]++
			}
		}
		wr.seen[[3]int64{seenClient, client, minute}]++
		if upID >= 0 {
			wr.seen[[3]int64{seenUpstream, upID, minute}]++
		}
		if listID >= 0 {
			wr.seen[[3]int64{seenList, listID, minute}]++
		}
	}
	if err := wr.flushCounters(tx); err != nil {
		return err
	}
	if err := tx.commit(); err != nil {
		return err
	}
	s.measure()
	return nil
}

// txn is a transaction on the writer's connection: BEGIN IMMEDIATE, so
// that it never has to upgrade a read lock (and fail busy) half-way.
type txn struct {
	conn *sql.Conn
	done bool
}

func (s *sqliteStore) begin() (*txn, error) {
	if _, err := s.conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		return nil, err
	}
	return &txn{conn: s.conn}, nil
}

func (t *txn) commit() error {
	t.done = true
	_, err := t.conn.ExecContext(context.Background(), `COMMIT`)
	if err != nil {
		_, _ = t.conn.ExecContext(context.Background(), `ROLLBACK`)
	}
	return err
}

func (t *txn) rollback() {
	if !t.done {
		t.done = true
		_, _ = t.conn.ExecContext(context.Background(), `ROLLBACK`)
	}
}

func (wr *writer) flushCounters(tx *txn) error {
	defer func() {
		clear(wr.minutes)
		clear(wr.tops)
		clear(wr.seen)
	}()
	st := wr.addMinute
	for k, n := range wr.minutes {
		if _, err := st.Exec(k[0], k[1], n); err != nil {
			return err
		}
	}
	st = wr.addTop
	for k, n := range wr.tops {
		if _, err := st.Exec(k[0], k[1], k[2], n); err != nil {
			return err
		}
	}
	st = wr.addSeen
	for k, n := range wr.seen {
		if _, err := st.Exec(k[0], k[1], k[2], n); err != nil {
			return err
		}
	}
	return nil
}

// dict returns the id of text in a dictionary table, adding it when new.
func (wr *writer) dict(tx *txn, cache map[string]int64, text string, sel, ins *sql.Stmt) (int64, error) {
	if id, ok := cache[text]; ok {
		return id, nil
	}
	var id int64
	err := sel.QueryRow(text).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		res, err := ins.Exec(text)
		if err != nil {
			return 0, err
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, err
	}
	if len(cache) >= dictCap {
		clear(cache)
	}
	cache[text] = id
	return id, nil
}

func (wr *writer) client(tx *txn, r *Row) (int64, error) {
	var addr string
	if r.Client.IsValid() {
		addr = r.Client.Unmap().String()
	}
	k := clientKey{addr, r.ClientName}
	if id, ok := wr.clients[k]; ok {
		return id, nil
	}
	var id int64
	err := wr.clientID.QueryRow(addr, r.ClientName).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		res, err := wr.insClient.Exec(addr, r.ClientName)
		if err != nil {
			return 0, err
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, err
	}
	if len(wr.clients) >= dictCap {
		clear(wr.clients)
	}
	wr.clients[k] = id
	return id, nil
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
