package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
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

	nameID, insName, clientID, insClient, labelID, insLabel *sql.Stmt

	// INSERTs of several rows or counters at once.
	insRows, addMinutes, addTops, addSeen, addNames multi
	fresh                                           map[string]int64 // names the batch added or found, by addNames
	missing                                         []any            // names the caches lack, reused
	vals                                            []rowVals        // the batch's rows, reused
	args                                            []any            // one statement's arguments, reused

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

// clientKey is a client as the cache knows it: the address as it is
// (unmapped), so that a row that hits costs no formatting.
type clientKey struct {
	addr netip.Addr
	name string
}

func newWriter(s *sqliteStore) (*writer, error) {
	wr := &writer{
		s:       s,
		names:   make(map[string]int64),
		clients: make(map[clientKey]int64),
		labels:  make(map[string]int64),
		minutes: make(map[[2]int64]int64),
		tops:    make(map[[3]int64]int64),
		seen:    make(map[[3]int64]int64),
		fresh:   make(map[string]int64),
	}
	stmts := []struct {
		p   **sql.Stmt
		sql string
	}{
		{&wr.nameID, `SELECT id FROM names WHERE name = ?`},
		{&wr.insName, `INSERT INTO names (name) VALUES (?)`},
		{&wr.clientID, `SELECT id FROM clients WHERE addr = ? AND name = ?`},
		{&wr.insClient, `INSERT INTO clients (addr, name) VALUES (?, ?)`},
		{&wr.labelID, `SELECT id FROM labels WHERE text = ?`},
		{&wr.insLabel, `INSERT INTO labels (text) VALUES (?)`},
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
		{&wr.insRows, `INSERT INTO q (id, name, client, qtype, flags, upstream, list, dur) VALUES `, `(?,?,?,?,?,?,?,?)`, ``},
		{&wr.addMinutes, `INSERT INTO minutes (minute, outcome, n) VALUES `, `(?,?,?)`, upsert},
		{&wr.addTops, `INSERT INTO tops (what, hour, key, n) VALUES `, `(?,?,?,?)`, upsert},
		{&wr.addSeen, `INSERT INTO seen (what, key, minute, n) VALUES `, `(?,?,?,?)`, upsert},
		// New and uncached names, many a statement: the no-op update
		// makes RETURNING give the id of a name already there too.
		{&wr.addNames, `INSERT INTO names (name) VALUES `, `(?)`, ` ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id, name`},
	}
	for _, m := range multis {
		if err := m.m.prepare(s.conn, m.head, m.tuple, m.tail); err != nil {
			wr.close()
			return nil, err
		}
	}
	return wr, nil
}

func (wr *writer) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{wr.nameID, wr.insName, wr.clientID, wr.insClient, wr.labelID, wr.insLabel} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, m := range []*multi{&wr.insRows, &wr.addMinutes, &wr.addTops, &wr.addSeen, &wr.addNames} {
		errs = append(errs, m.close())
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
	// The names the cache lacks, many a statement.
	if err := wr.resolveNames(rows); err != nil {
		return err
	}
	// The rows' values (dictionary ids from the writer's maps, SQL only
	// for new entries), then multi-row INSERTs of them.
	vals := wr.vals[:0]
	for i := range rows {
		r := &rows[i]
		v := rowVals{name: -1, upstream: -1, list: -1}
		if r.QName != "" || r.QType != 0 {
			name := strings.ToLower(r.QName)
			id, ok := wr.fresh[name]
			if !ok {
				if id, err = wr.dict(tx, wr.names, name, wr.nameID, wr.insName); err != nil {
					return err
				}
			}
			v.name = id
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
		v.src, v.rcode = sourceCode(r.Source), r.Rcode
		v.flags = flags(protoCode(r.Proto), v.src, r.Rcode)
		v.qtype = int64(r.QType)
		v.dur = int64(r.Duration / durUnit)
		v.key = s.key(r.Time)
		vals = append(vals, v)
	}
	wr.vals = vals
	last := int64(-1 << 62)
	for len(vals) > 0 {
		n, st := wr.insRows.pick(len(vals))
		chunk := vals[:n]
		vals = vals[n:]
		args := wr.args[:0]
		for i := range chunk {
			v := &chunk[i]
			v.key = max(v.key, last+1) // sorted: a tie within the batch moves by 1 µs
			last = v.key
			args = append(args, v.key, null(v.name), v.client, v.qtype, v.flags, null(v.upstream), null(v.list), v.dur)
		}
		_, err = st.Exec(args...)
		clear(args)
		wr.args = args[:0]
		if isConstraint(err) {
			// A row of an earlier batch holds one of these microseconds:
			// one at a time, each moved to the next free one (which is
			// near: rows are microseconds apart at most rates).
			last, err = wr.insertEach(chunk, chunk[0].key-1)
		}
		if err != nil {
			return err
		}
		for i := range chunk {
			wr.count(&chunk[i])
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

// resolveNames finds or adds, into fresh, the names of rows that the
// names cache lacks, with INSERTs of many names each.
func (wr *writer) resolveNames(rows []Row) error {
	clear(wr.fresh)
	missing := wr.missing[:0]
	defer func() { clear(missing); wr.missing = missing[:0] }()
	for i := range rows {
		r := &rows[i]
		if r.QName == "" && r.QType == 0 {
			continue
		}
		name := strings.ToLower(r.QName)
		if _, ok := wr.names[name]; ok {
			continue
		}
		if _, ok := wr.fresh[name]; ok {
			continue
		}
		wr.fresh[name] = -1
		missing = append(missing, name)
	}
	for left := missing; len(left) > 0; {
		n, st := wr.addNames.pick(len(left))
		res, err := st.Query(left[:n]...)
		if err != nil {
			return err
		}
		for res.Next() {
			var id int64
			var name string
			if err := res.Scan(&id, &name); err != nil {
				res.Close()
				return err
			}
			wr.fresh[name] = id
		}
		if err := res.Close(); err != nil {
			return err
		}
		if err := res.Err(); err != nil {
			return err
		}
		left = left[n:]
	}
	for name, id := range wr.fresh {
		if id < 0 {
			return fmt.Errorf("history: name %q not returned by its INSERT", name)
		}
		if len(wr.names) >= dictCap {
			clear(wr.names)
		}
		wr.names[name] = id
	}
	return nil
}

// rowVals is a row as the columns of q hold it; -1 for a NULL id.
type rowVals struct {
	key, name, client, qtype, flags, upstream, list, dur int64
	src, rcode                                           int
}

func null(id int64) any {
	if id < 0 {
		return nil
	}
	return id
}

// insertEach inserts chunk's rows one INSERT each, moving a row whose
// microsecond is taken to the next free one; last is the key before the
// first row's. It returns the last row's key.
func (wr *writer) insertEach(chunk []rowVals, last int64) (int64, error) {
	ins := wr.insRows.stmts[len(wr.insRows.stmts)-1]
	for i := range chunk {
		v := &chunk[i]
		v.key = max(v.key, last+1)
		var err error
		for try := 0; ; try++ {
			_, err = ins.Exec(v.key, null(v.name), v.client, v.qtype, v.flags, null(v.upstream), null(v.list), v.dur)
			if !isConstraint(err) || try == maxKeyTries {
				break
			}
			v.key++
		}
		if err != nil {
			return last, err
		}
		last = v.key
	}
	return last, nil
}

// count adds a written row to the batch's counters.
func (wr *writer) count(v *rowVals) {
	minute, hour := floorDiv(v.key, usPerMinute), floorDiv(v.key, usPerHour)
	wr.minutes[[2]int64{minute, int64(outcome(v.src, v.rcode))}]++
	if v.name >= 0 {
		wr.tops[[3]int64{topDomains, hour, v.name}]++
		if v.src == srcBlocked {
			wr.tops[[3]int64{topBlocked, hour, v.name}]++
		}
	}
	wr.seen[[3]int64{seenClient, v.client, minute}]++
	if v.upstream >= 0 {
		wr.seen[[3]int64{seenUpstream, v.upstream, minute}]++
	}
	if v.list >= 0 {
		wr.seen[[3]int64{seenList, v.list, minute}]++
	}
}

var srcBlocked = sourceCode("blocked")

// multi is one INSERT prepared for several numbers of VALUES tuples,
// largest first, the last for one: a batch is written in few statements.
type multi struct {
	sizes []int
	stmts []*sql.Stmt
}

// tupleSizes are the numbers of VALUES tuples multi prepares. 128 rows
// of 8 columns is 1,024 parameters, under SQLite's default limit of 32,766.
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

func (wr *writer) flushCounters(tx *txn) error {
	defer func() {
		clear(wr.minutes)
		clear(wr.tops)
		clear(wr.seen)
	}()
	args := wr.args[:0]
	defer func() { clear(args); wr.args = args[:0] }()
	for k, n := range wr.minutes {
		args = append(args, k[0], k[1], n)
	}
	if err := wr.addMinutes.execAll(args, 3); err != nil {
		return err
	}
	args = args[:0]
	for k, n := range wr.tops {
		args = append(args, k[0], k[1], k[2], n)
	}
	if err := wr.addTops.execAll(args, 4); err != nil {
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
	k := clientKey{r.Client.Unmap(), r.ClientName}
	if id, ok := wr.clients[k]; ok {
		return id, nil
	}
	var addr string
	if k.addr.IsValid() {
		addr = k.addr.String()
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
