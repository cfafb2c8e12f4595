package history

import (
	"context"
	"database/sql"
	"errors"
	"net/netip"
	"slices"
	"strings"
)

// dictCap bounds each dictionary cache of the writer.
const dictCap = 1 << 14

// maxKeyTries bounds the search for a free microsecond near a row's own.
const maxKeyTries = 8

// Sizes of chunks (chunk.go). Each batch is written as a small chunk of
// its own rows; when the small chunks hold chunkRows rows, or there are
// maxSmalls of them, they are merged into sealed chunks of chunkRows rows
// at most. A row is so written twice, whatever the rate, and the file
// holds few small chunks.
const (
	chunkRows = 8192
	maxSmalls = 64
)

// writer is the write side of sqliteStore: prepared statements,
// dictionary caches and the rows not yet sealed, owned by the writer
// goroutine.
type writer struct {
	s *sqliteStore

	clientID, insClient, labelID, insLabel *sql.Stmt
	putChunk, delSmalls                    *sql.Stmt

	addMinutes, addSeen multi
	args                []any // one statement's arguments, reused

	clients map[clientKey]int64
	labels  map[string]int64

	// Counters of the batch being written, reused.
	minutes map[[2]int64]int64 // minute, outcome
	seen    map[[3]int64]int64 // what, key, minute

	// The rows of the small chunks, sorted by key. Rows are never
	// stamped at or before sealed, the last key of the sealed chunks: a
	// row that arrives later than that is moved 1 µs after it.
	unsealed []chunkRow
	smalls   int
	sealed   int64
	enc      encoder
	batch    []chunkRow // reused
	spare    []chunkRow // the next unsealed, reused
	newest   int64      // the newest key given a row

	// State of maintain.
	trimming  bool     // past the high water mark, until under the low one
	sweeping  bool     // rows were deleted: sweep the dictionaries
	sweepFrom [2]int64 // the next id to sweep in clients, labels
}

// clientKey is a client as the cache knows it: the address as it is
// (unmapped), so that a row that hits costs no formatting.
type clientKey struct {
	addr netip.Addr
	name string
}

func newWriter(s *sqliteStore) (*writer, error) {
	wr := &writer{
		s:       s,
		clients: make(map[clientKey]int64),
		labels:  make(map[string]int64),
		minutes: make(map[[2]int64]int64),
		seen:    make(map[[3]int64]int64),
		sealed:  -1 << 62,
		newest:  -1 << 62,
	}
	stmts := []struct {
		p   **sql.Stmt
		sql string
	}{
		{&wr.clientID, `SELECT id FROM clients WHERE addr = ? AND name = ?`},
		{&wr.insClient, `INSERT INTO clients (addr, name) VALUES (?, ?)`},
		{&wr.labelID, `SELECT id FROM labels WHERE text = ?`},
		{&wr.insLabel, `INSERT INTO labels (text) VALUES (?)`},
		{&wr.putChunk, `INSERT INTO chunks (first, last, n, sealed, names, cols) VALUES (?, ?, ?, ?, ?, ?)`},
		{&wr.delSmalls, `DELETE FROM chunks WHERE sealed = 0`},
	}
	for _, st := range stmts {
		p, err := s.conn.PrepareContext(context.Background(), st.sql)
		if err != nil {
			wr.close()
			return nil, err
		}
		*st.p = p
	}
	const upsert = ` ON CONFLICT DO UPDATE SET n = n + excluded.n`
	multis := []struct {
		m                 *multi
		head, tuple, tail string
	}{
		{&wr.addMinutes, `INSERT INTO minutes (minute, outcome, n) VALUES `, `(?,?,?)`, upsert},
		{&wr.addSeen, `INSERT INTO seen (what, key, minute, n) VALUES `, `(?,?,?,?)`, upsert},
	}
	for _, m := range multis {
		if err := m.m.prepare(s.conn, m.head, m.tuple, m.tail); err != nil {
			wr.close()
			return nil, err
		}
	}
	if err := wr.load(); err != nil {
		wr.close()
		return nil, err
	}
	return wr, nil
}

// load reads the state of an existing database: the sealed chunks' last
// key, and the small chunks' rows.
func (wr *writer) load() error {
	ctx := context.Background()
	var last sql.NullInt64
	if err := wr.s.conn.QueryRowContext(ctx, `SELECT max(last) FROM chunks WHERE sealed = 1`).Scan(&last); err != nil {
		return err
	}
	if last.Valid {
		wr.sealed = last.Int64
	}
	wr.newest = wr.sealed
	rows, err := wr.s.conn.QueryContext(ctx, `SELECT first, names, cols FROM chunks WHERE sealed = 0`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var c chunk
	for rows.Next() {
		var id int64
		var names, cols []byte
		if err := rows.Scan(&id, &names, &cols); err != nil {
			return err
		}
		if err := c.parse(id, names, cols); err != nil {
			return err
		}
		got, err := c.rows(nil)
		if err != nil {
			return err
		}
		for _, r := range got {
			wr.unsealed = append(wr.unsealed, r)
			wr.newest = max(wr.newest, r.key)
		}
		wr.smalls++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	slices.SortFunc(wr.unsealed, func(a, b chunkRow) int { return cmpKey(a.key, b.key) })
	return nil
}

func cmpKey(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (wr *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{wr.clientID, wr.insClient, wr.labelID, wr.insLabel, wr.putChunk, wr.delSmalls} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, m := range []*multi{&wr.addMinutes, &wr.addSeen} {
		errs = append(errs, m.close())
	}
	return errors.Join(errs...)
}

// forget empties the dictionary caches: after entries were deleted, a
// cached id may name nothing.
func (wr *writer) forget() {
	clear(wr.clients)
	clear(wr.labels)
}

const (
	usPerMinute = 60_000_000
	usPerHour   = 3600_000_000
	durUnit     = 10_000 // ns: durations are stored in 10 µs units (duration_ms to two decimals)
)

// write stores a batch: a small chunk of its rows, or, when that makes
// enough, the small chunks' rows and the batch's merged into sealed
// chunks; and the counters. The writer's memory of the small chunks
// changes only when the transaction commits.
func (s *sqliteStore) write(rows []Row) (err error) {
	wr := s.wr
	defer func() {
		clear(wr.minutes)
		clear(wr.seen)
		if err != nil {
			// Ids added by the transaction rolled back name nothing.
			wr.forget()
		}
	}()
	tx, err := s.begin()
	if err != nil {
		return err
	}
	defer tx.rollback()
	batch := wr.batch[:0]
	defer func() { clear(batch); wr.batch = batch[:0] }()
	// Each row as the chunk holds it, keyed first by its own time, then
	// in time order (a chunkRow moves in the sort for less than a Row).
	for i := range rows {
		r := &rows[i]
		v := chunkRow{key: s.key(r.Time), upstream: -1, list: -1}
		if r.QName != "" || r.QType != 0 {
			v.name = strings.ToLower(r.QName)
			if v.name == "" {
				v.name = "."
			}
		}
		if v.client, err = wr.client(tx, r); err != nil {
			return err
		}
		if r.Upstream != "" {
			if v.upstream, err = wr.dict(tx, wr.labels, r.Upstream, wr.labelID, wr.insLabel); err != nil {
				return err
			}
		}
		if r.List != "" {
			if v.list, err = wr.dict(tx, wr.labels, r.List, wr.labelID, wr.insLabel); err != nil {
				return err
			}
		}
		v.flags = flags(protoCode(r.Proto), sourceCode(r.Source), r.Rcode)
		v.qtype = int64(r.QType)
		v.dur = int64(r.Duration / durUnit)
		batch = append(batch, v)
	}
	slices.SortFunc(batch, func(a, b chunkRow) int { return cmpKey(a.key, b.key) })
	newest := wr.assignKeys(batch)

	// A batch of half a chunk or more with no small chunk before it is
	// sealed at once: at high rates rows are then written once.
	seal := len(wr.unsealed)+len(batch) >= s.rowsPerChunk || wr.smalls+1 >= maxSmalls ||
		len(wr.unsealed) == 0 && len(batch) >= s.rowsPerChunk/2
	var merged []chunkRow
	if seal {
		merged = mergeRows(wr.spare[:0], wr.unsealed, batch)
		if _, err := wr.delSmalls.Exec(); err != nil {
			return err
		}
		for rest := merged; len(rest) > 0; {
			n := min(len(rest), s.rowsPerChunk)
			if err := wr.put(rest[:n], true); err != nil {
				return err
			}
			rest = rest[n:]
		}
	} else if err := wr.put(batch, false); err != nil {
		return err
	}
	if err := wr.flushCounters(); err != nil {
		return err
	}
	if err := tx.commit(); err != nil {
		return err
	}
	wr.newest = newest
	if seal {
		wr.sealed = merged[len(merged)-1].key
		clear(merged)
		wr.spare = merged[:0]
		clear(wr.unsealed)
		wr.unsealed = wr.unsealed[:0]
		wr.smalls = 0
	} else {
		next := mergeRows(wr.spare[:0], wr.unsealed, batch)
		clear(wr.unsealed)
		wr.unsealed, wr.spare = next, wr.unsealed[:0]
		wr.smalls++
	}
	s.afterCommit()
	s.measure()
	return nil
}

// assignKeys gives each row of batch, sorted by its own time's key, a key
// of its own and counts it, and returns the newest key given. A key is
// unique and after the sealed chunks': a row whose microsecond is taken
// moves to the next free one. The batch's keys come out strictly
// increasing (each row's own is at least its predecessor's, and every
// key between a row's own and the one it got is taken), so a row is
// checked against the batch by its predecessor's key alone, and
// against the small chunks' rows only when its key is not past their
// newest (a row that took long, or a clock stepped back).
func (wr *writer) assignKeys(batch []chunkRow) int64 {
	prev, old := wr.sealed, wr.newest
	for i := range batch {
		v := &batch[i]
		k := max(v.key, prev+1)
		for try := 0; k <= old && wr.unsealedHas(k); try++ {
			if try == maxKeyTries {
				// A run of taken microseconds: after every key, at once,
				// rather than one by one through the run.
				k = max(old, prev)
			}
			k++
		}
		v.key, prev = k, k
		_, src, rcode := unflags(v.flags)
		wr.count(v, src, rcode)
	}
	return max(old, prev)
}

// unsealedHas reports whether a row of the small chunks has key k.
func (wr *writer) unsealedHas(k int64) bool {
	_, found := slices.BinarySearchFunc(wr.unsealed, k, func(r chunkRow, k int64) int { return cmpKey(r.key, k) })
	return found
}

// mergeRows appends a and b, each sorted by key, merged, to out (which
// shares no memory with them).
func mergeRows(out, a, b []chunkRow) []chunkRow {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].key <= b[j].key {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// put inserts one chunk of rows (sorted by key).
func (wr *writer) put(rows []chunkRow, sealed bool) error {
	names, cols := wr.enc.encode(rows)
	s := 0
	if sealed {
		s = 1
	}
	_, err := wr.putChunk.Exec(rows[0].key, rows[len(rows)-1].key, len(rows), s, names, cols)
	return err
}

// seal merges the small chunks into sealed ones now (retention, before it
// deletes rows the small chunks hold).
func (wr *writer) seal() error {
	if len(wr.unsealed) == 0 {
		return nil
	}
	tx, err := wr.s.begin()
	if err != nil {
		return err
	}
	defer tx.rollback()
	if _, err := wr.delSmalls.Exec(); err != nil {
		return err
	}
	for rest := wr.unsealed; len(rest) > 0; {
		n := min(len(rest), wr.s.rowsPerChunk)
		if err := wr.put(rest[:n], true); err != nil {
			return err
		}
		rest = rest[n:]
	}
	if err := tx.commit(); err != nil {
		return err
	}
	wr.sealed = wr.unsealed[len(wr.unsealed)-1].key
	clear(wr.unsealed)
	wr.unsealed = wr.unsealed[:0]
	wr.smalls = 0
	return nil
}

// count adds a row to the batch's counters.
func (wr *writer) count(v *chunkRow, src, rcode int) {
	minute := floorDiv(v.key, usPerMinute)
	wr.minutes[[2]int64{minute, int64(outcome(src, rcode))}]++
	wr.seen[[3]int64{seenClient, v.client, minute}]++
	if v.upstream >= 0 {
		wr.seen[[3]int64{seenUpstream, v.upstream, minute}]++
	}
	if v.list >= 0 {
		wr.seen[[3]int64{seenList, v.list, minute}]++
	}
}

// multi is one INSERT prepared for several numbers of VALUES tuples,
// largest first, the last for one: a batch is written in few statements.
type multi struct {
	sizes []int
	stmts []*sql.Stmt
}

// tupleSizes are the numbers of VALUES tuples multi prepares.
var tupleSizes = []int{128, 16, 1}

func (m *multi) prepare(conn *sql.Conn, head, tuple, tail string) error {
	for _, n := range tupleSizes {
		var b strings.Builder
		b.WriteString(head)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(tuple)
		}
		b.WriteString(tail)
		st, err := conn.PrepareContext(context.Background(), b.String())
		if err != nil {
			return err
		}
		m.sizes = append(m.sizes, n)
		m.stmts = append(m.stmts, st)
	}
	return nil
}

// pick returns the largest number of tuples up to left and its statement.
func (m *multi) pick(left int) (int, *sql.Stmt) {
	for i, n := range m.sizes {
		if n <= left {
			return n, m.stmts[i]
		}
	}
	return 1, m.stmts[len(m.stmts)-1]
}

func (m *multi) close() error {
	var errs []error
	for _, st := range m.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
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

func (wr *writer) flushCounters() error {
	args := wr.args[:0]
	defer func() { clear(args); wr.args = args[:0] }()
	for k, n := range wr.minutes {
		args = append(args, k[0], k[1], n)
	}
	if err := wr.addMinutes.execAll(args, 3); err != nil {
		return err
	}
	args = args[:0]
	for k, n := range wr.seen {
		args = append(args, k[0], k[1], k[2], n)
	}
	return wr.addSeen.execAll(args, 4)
}

// execAll runs m's statements over args, width arguments a tuple.
func (m *multi) execAll(args []any, width int) error {
	for len(args) > 0 {
		n, st := m.pick(len(args) / width)
		if _, err := st.Exec(args[:n*width]...); err != nil {
			return err
		}
		args = args[n*width:]
	}
	return nil
}

// dict returns the id of text in a dictionary table, adding it when new.
func (wr *writer) dict(tx *txn, cache map[string]int64, text string, sel, ins *sql.Stmt) (int64, error) {
	if id, ok := cache[text]; ok {
		return id, nil
	}
	id, err := lookupOrAdd(sel, ins, text)
	if err != nil {
		return 0, err
	}
	if len(cache) >= dictCap {
		clear(cache)
	}
	cache[text] = id
	return id, nil
}

func (wr *writer) client(tx *txn, r *Row) (int64, error) {
	k := clientKey{r.Client.Unmap(), r.ClientName}
	if id, ok := wr.clients[k]; ok {
		return id, nil
	}
	var addr string
	if k.addr.IsValid() {
		addr = k.addr.String()
	}
	id, err := lookupOrAdd(wr.clientID, wr.insClient, addr, r.ClientName)
	if err != nil {
		return 0, err
	}
	if len(wr.clients) >= dictCap {
		clear(wr.clients)
	}
	wr.clients[k] = id
	return id, nil
}

// lookupOrAdd returns the id sel finds for args, or the one ins gives
// them as a new entry.
func lookupOrAdd(sel, ins *sql.Stmt, args ...any) (int64, error) {
	var id int64
	err := sel.QueryRow(args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		res, err := ins.Exec(args...)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	return id, err
}
