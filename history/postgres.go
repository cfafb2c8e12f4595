package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgTable is the table of a shared history's rows.
const pgTable = "nxdns_history"

// pgMigrations are the schema's versions, in order: migration i takes a
// database from version i to i+1, in one transaction. Append only: a
// database created by an older binary is brought up to date at start, and
// one of a newer binary is refused (errNewerSchema).
//
// A row is stored as the API says it, one column per field and no
// dictionaries: PostgreSQL's own storage and indexes serve a fleet's
// reads, and a replica writes with COPY alone, never reading ids back.
var pgMigrations = []string{
	// 1: the rows, and the time index every read walks.
	`CREATE TABLE nxdns_history (
		id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		ts          timestamptz NOT NULL,
		instance    text NOT NULL,
		client      text NOT NULL,
		client_name text NOT NULL,
		proto       text NOT NULL,
		qname       text NOT NULL,
		qtype       integer NOT NULL,
		rcode       integer NOT NULL,
		source      text NOT NULL,
		upstream    text NOT NULL,
		duration_us bigint NOT NULL,
		list        text NOT NULL
	);
	CREATE INDEX nxdns_history_ts ON nxdns_history (ts, id)`,
	// 2: one replica's rows (the instance filter) without walking the
	// fleet's.
	`CREATE INDEX nxdns_history_instance_ts ON nxdns_history (instance, ts, id)`,
	// 3: no index of the ids alone. It served only a cursor's lookup,
	// which the time index serves now (pgCursor), and cost the server
	// about a sixth of its CPU a row written (BenchmarkPostgresCopy).
	// The identity still numbers the rows.
	`ALTER TABLE nxdns_history DROP CONSTRAINT IF EXISTS nxdns_history_pkey`,
	// 4: a batch's rows as one row of arrays, a column each, and the rows
	// as a view of them. The server stored a row a heap tuple with an
	// entry in each index, 5.2 µs of its CPU a row written (57 % of it
	// the b-trees'), on the cores the queries use; a batch of 2,000
	// rows as one tuple costs it 1.4-1.6 µs a row (BenchmarkPostgresCopy).
	// The view numbers a row by its batch and its place in it, so that
	// every read is the SQL it was; the batch's times, in the view too,
	// let a read's bounds find the batches through their index before
	// any array is opened (where.span). An older schema's rows are
	// moved into batches of 8,192 in their order.
	`CREATE TABLE nxdns_history_batches (
		id          bigint GENERATED ALWAYS AS IDENTITY,
		instance    text NOT NULL,
		ts_min      timestamptz NOT NULL,
		ts_max      timestamptz NOT NULL,
		n           integer NOT NULL,
		ts          timestamptz[] NOT NULL,
		client      text[] NOT NULL,
		client_name text[] NOT NULL,
		proto       text[] NOT NULL,
		qname       text[] NOT NULL,
		qtype       integer[] NOT NULL,
		rcode       integer[] NOT NULL,
		source      text[] NOT NULL,
		upstream    text[] NOT NULL,
		duration_us bigint[] NOT NULL,
		list        text[] NOT NULL
	);
	CREATE INDEX nxdns_history_batches_ts ON nxdns_history_batches (ts_max);
	INSERT INTO nxdns_history_batches
		(instance, ts_min, ts_max, n, ts, client, client_name, proto, qname, qtype, rcode, source, upstream, duration_us, list)
		SELECT instance, min(ts), max(ts), count(*), array_agg(ts ORDER BY id), array_agg(client ORDER BY id),
			array_agg(client_name ORDER BY id), array_agg(proto ORDER BY id), array_agg(qname ORDER BY id),
			array_agg(qtype ORDER BY id), array_agg(rcode ORDER BY id), array_agg(source ORDER BY id),
			array_agg(upstream ORDER BY id), array_agg(duration_us ORDER BY id), array_agg(list ORDER BY id)
		FROM nxdns_history GROUP BY instance, id / 8192;
	DROP TABLE nxdns_history;
	CREATE VIEW nxdns_history AS
		SELECT b.id * ` + pgBatchRowsStr + ` + r.ord - 1 AS id, r.ts, b.instance, r.client, r.client_name, r.proto, r.qname,
			r.qtype, r.rcode, r.source, r.upstream, r.duration_us, r.list, b.ts_min AS batch_min, b.ts_max AS batch_max
		FROM nxdns_history_batches b,
			unnest(b.ts, b.client, b.client_name, b.proto, b.qname, b.qtype, b.rcode, b.source, b.upstream, b.duration_us, b.list)
			WITH ORDINALITY AS r(ts, client, client_name, proto, qname, qtype, rcode, source, upstream, duration_us, list, ord)`,
}

// A cursor (page.Next, filter.Cursor) names a row by its time in
// milliseconds and the low pgCursorBits of its id: the time index finds
// the rows of that millisecond, and the id the row among them. Two rows of one millisecond
// whose ids are equal in those bits (a million apart) would be
// confused; a cursor stays positive until the year 2248.
const (
	pgCursorBits = 20
	pgCursorMask = 1<<pgCursorBits - 1
)

// pgCursor is the cursor of the row at ts with id.
func pgCursor(ts time.Time, id int64) int64 {
	return floorDiv(ts.UnixMicro(), 1000)<<pgCursorBits | id&pgCursorMask
}

// pgLockMigrate and pgLockRetention are advisory lock keys ("nxdh" and
// a purpose): replicas starting together migrate one after the other,
// and retention runs on one replica at a time.
const (
	pgLockMigrate   = 0x6e786468_0001
	pgLockRetention = 0x6e786468_0002
)

// Timeouts of the PostgreSQL store: a database that is slow holds the
// writer this long at most (its rows wait in the queue meanwhile), and an
// API read.
const (
	pgWriteTimeout = 10 * time.Second
	pgReadTimeout  = 15 * time.Second
	pgOpenTimeout  = 5 * time.Second
)

// errNewerSchema says that the database was migrated by a newer nxdnsd.
var errNewerSchema = errors.New("history: the PostgreSQL schema is newer than this nxdnsd knows")

// errRetry marks a write that failed because the database could not be
// reached (or answered too slowly): its rows are kept and written again,
// not dropped.
var errRetry = errors.New("history: the PostgreSQL database is unreachable")

// pgStore is a history shared by a fleet in one PostgreSQL database
// (spec section 16): every replica writes its rows tagged with its
// instance, and reads see the fleet's.
type pgStore struct {
	pool     *pgxpool.Pool // always non-nil; it reconnects on its own
	instance string

	mu       sync.Mutex // guards following
	migrated bool       // the schema is known to be current

	bytes atomic.Int64 // the table's size, as of the last maintain

	// A batch's COPY data and its arrays' elements, reused; owned by
	// the writer goroutine (write).
	buf  []byte
	cols [pgArrays][]byte
}

var _ store = (*pgStore)(nil)

// openPostgres connects to the database and brings its schema up to
// date. A database that cannot be reached is not an error: the store
// is returned, writes wait and reads answer ErrUnavailable until it can
// be (the caller logs the returned warning). A connection string that
// does not parse, or a schema that is newer than this binary, is.
func openPostgres(connString, instance string) (*pgStore, error, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgconn's message may quote the string and its password.
		return nil, nil, errors.New("history: history.postgres is not a PostgreSQL connection string")
	}
	cfg.MaxConns = 4
	cfg.MinConns = 0
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgOpenTimeout
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "nxdnsd " + instance
	}
	asyncCommit(cfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("history: %w", err)
	}
	s := &pgStore{pool: pool, instance: instance}
	ctx, cancel := context.WithTimeout(context.Background(), pgOpenTimeout)
	defer cancel()
	if err := s.ensure(ctx); err != nil {
		if errors.Is(err, errRetry) {
			return s, err, nil
		}
		pool.Close()
		return nil, nil, err
	}
	return s, nil, nil
}

// asyncCommit sets synchronous_commit off for the store's sessions
// unless the connection string sets it (a synchronous_commit parameter,
// or -c synchronous_commit in options). A batch's COPY then returns
// without waiting for the server to flush its WAL to disk: the writer is
// one goroutine, and a flush that a busy disk holds (a checkpoint's
// writes, another program's: one 2,000-row batch waited 3.0 s on the
// benchmark machine) stops it while the queue fills and rows are
// dropped. What a server crash can lose is the last
// few hundred milliseconds of rows counted as written (wal_writer_delay,
// 200 ms by default, three times at most), as SQLite's
// synchronous=NORMAL can on a power loss; the database itself stays
// consistent.
func asyncCommit(params map[string]string) {
	if _, set := params["synchronous_commit"]; set || strings.Contains(params["options"], "synchronous_commit") {
		return
	}
	params["synchronous_commit"] = "off"
}

// ensure migrates the schema unless that was done already.
func (s *pgStore) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migrated {
		return nil
	}
	if err := migratePostgres(ctx, s.pool, len(pgMigrations)); err != nil {
		return classifyPG(err)
	}
	s.migrated = true
	return nil
}

// migratePostgres brings the schema to version want, each step in a
// transaction, under an advisory lock so that replicas starting together
// do it once.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool, want int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgLockMigrate)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS nxdns_history_schema (version integer NOT NULL)`); err != nil {
		return err
	}
	var version int
	err = tx.QueryRow(ctx, `SELECT version FROM nxdns_history_schema`).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := tx.Exec(ctx, `INSERT INTO nxdns_history_schema (version) VALUES (0)`); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if version > len(pgMigrations) {
		return fmt.Errorf("%w: version %d, this nxdnsd knows %d", errNewerSchema, version, len(pgMigrations))
	}
	for ; version < want; version++ {
		if _, err := tx.Exec(ctx, pgMigrations[version]); err != nil {
			return fmt.Errorf("history: migrating the PostgreSQL schema to version %d: %w", version+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE nxdns_history_schema SET version = $1`, version); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// classifyPG marks the errors of a database that could not be reached, or
// did not answer in time, with errRetry (and ErrUnavailable, so that the
// API answers 503); what the database refused is returned as it is.
func classifyPG(err error) error {
	if err == nil || errors.Is(err, errRetry) || errors.Is(err, errNewerSchema) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57P"), // the server shutting down, crashed or starting
			strings.HasPrefix(pe.Code, "53"):  // out of resources
		default:
			return err
		}
	}
	return fmt.Errorf("%w (%w): %w", errRetry, ErrUnavailable, err)
}

// A batch is one row of nxdns_history_batches: its rows' fields as
// arrays, one a column, numbered in the view by the batch's id times
// pgBatchRows plus their place. write never sends more than pgBatchRows
// rows in one.
const (
	pgBatchRows    = 1 << 15
	pgBatchRowsStr = "32768"
)

// The writer's batches fit one row of arrays, and a cursor's low bits
// (pgCursorBits) hold a row's place in its batch and some of its batch.
var _ [pgBatchRows - pgMaxBatch]struct{}
var _ [pgCursorBits - 15]struct{}

// pgCopy is the statement of a batch: COPY of the columns write sends,
// in its order, in PostgreSQL's binary format.
const pgCopy = `COPY nxdns_history_batches (instance, ts_min, ts_max, n, ` +
	`ts, client, client_name, proto, qname, qtype, rcode, source, upstream, duration_us, list) FROM STDIN (FORMAT binary)`

// The arrays of a batch, in pgCopy's order, and their elements' types.
const (
	pgColTS = iota
	pgColClient
	pgColClientName
	pgColProto
	pgColQName
	pgColQType
	pgColRcode
	pgColSource
	pgColUpstream
	pgColDuration
	pgColList
	pgArrays
)

// PostgreSQL's type OIDs of the arrays' elements (pg_type.dat).
const (
	pgOIDInt4        = 23
	pgOIDInt8        = 20
	pgOIDText        = 25
	pgOIDTimestamptz = 1184
)

var pgArrayOID = [pgArrays]uint32{
	pgColTS: pgOIDTimestamptz, pgColClient: pgOIDText, pgColClientName: pgOIDText, pgColProto: pgOIDText,
	pgColQName: pgOIDText, pgColQType: pgOIDInt4, pgColRcode: pgOIDInt4, pgColSource: pgOIDText,
	pgColUpstream: pgOIDText, pgColDuration: pgOIDInt8, pgColList: pgOIDText,
}

// pgCopyHeader begins a binary COPY: the signature, no flags, no header
// extension.
const pgCopyHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// pgEpoch is PostgreSQL's timestamp epoch, 2000-01-01 UTC, in
// microseconds since the Unix epoch.
const pgEpoch = 946_684_800_000_000

// write sends the batch as one binary COPY of one row of arrays (two or
// more for a batch over pgBatchRows), encoded here into the store's
// buffers: pgx's own CopyFrom takes a []any a row, a boxed value a
// field, and plans each value's encoding, which cost the writer more
// than the rows' bytes.
func (s *pgStore) write(rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgWriteTimeout)
	defer cancel()
	if err := s.ensure(ctx); err != nil {
		return err
	}
	b := append(s.buf[:0], pgCopyHeader...)
	for len(rows) > 0 {
		n := min(len(rows), pgBatchRows)
		b = s.appendBatch(b, rows[:n])
		rows = rows[n:]
	}
	b = binary.BigEndian.AppendUint16(b, 0xffff) // the trailer: -1 fields
	s.buf = b
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classifyPG(err)
	}
	defer conn.Release()
	// One COPY is one statement: the batch is stored whole or not at all.
	_, err = conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(b), pgCopy)
	if err != nil {
		// CopyFrom may return while its goroutine still reads b (when
		// the connection failed): the next batch takes new memory.
		s.buf = nil
	}
	return classifyPG(err)
}

// appendBatch appends rows as one binary COPY tuple of pgCopy's fields.
func (s *pgStore) appendBatch(b []byte, rows []Row) []byte {
	for i := range s.cols {
		s.cols[i] = s.cols[i][:0]
	}
	lo, hi := int64(1<<63-1), int64(-1<<63)
	for i := range rows {
		ts := s.appendRow(&rows[i])
		lo, hi = min(lo, ts), max(hi, ts)
	}
	b = binary.BigEndian.AppendUint16(b, 4+pgArrays)
	b = appendText(b, s.instance)
	b = appendInt8(b, lo)
	b = appendInt8(b, hi)
	b = appendInt4(b, int32(len(rows)))
	for i, col := range s.cols {
		// A one-dimensional array without nulls: its header, then the
		// elements as appendRow wrote them, each its length and bytes.
		b = binary.BigEndian.AppendUint32(b, uint32(20+len(col)))
		b = binary.BigEndian.AppendUint32(b, 1) // dimensions
		b = binary.BigEndian.AppendUint32(b, 0) // no nulls
		b = binary.BigEndian.AppendUint32(b, pgArrayOID[i])
		b = binary.BigEndian.AppendUint32(b, uint32(len(rows)))
		b = binary.BigEndian.AppendUint32(b, 1) // the first index
		b = append(b, col...)
	}
	return b
}

// appendRow appends r's fields to the batch's arrays as stored, and
// returns its time: what SQLite would give back (the name in lower case,
// a source or proto this version does not know as none, the duration in
// 10 µs), its strings valid UTF-8 without NUL (PostgreSQL's text refuses
// the rest). It allocates only for a name that is not ASCII or a string
// that is not valid.
func (s *pgStore) appendRow(r *Row) (ts int64) {
	c := &s.cols
	t := r.Time
	ts = t.Unix()*1_000_000 + int64(t.Nanosecond()/1000) - pgEpoch
	c[pgColTS] = appendInt8(c[pgColTS], ts)
	// The address, its length patched in once it is written.
	b := c[pgColClient]
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	if r.Client.IsValid() {
		b = r.Client.Unmap().AppendTo(b)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	c[pgColClient] = b
	c[pgColClientName] = appendText(c[pgColClientName], r.ClientName)
	c[pgColProto] = appendText(c[pgColProto], protos[protoCode(r.Proto)])
	switch {
	case r.QName == "" && r.QType == 0:
		c[pgColQName] = appendText(c[pgColQName], "")
	case isASCII(r.QName):
		c[pgColQName] = appendLowerASCII(c[pgColQName], r.QName)
	default:
		c[pgColQName] = appendText(c[pgColQName], strings.ToLower(r.QName))
	}
	c[pgColQType] = appendInt4(c[pgColQType], int32(r.QType))
	c[pgColRcode] = appendInt4(c[pgColRcode], int32(r.Rcode))
	c[pgColSource] = appendText(c[pgColSource], sources[sourceCode(r.Source)])
	c[pgColUpstream] = appendText(c[pgColUpstream], r.Upstream)
	c[pgColDuration] = appendInt8(c[pgColDuration], int64(r.Duration/durUnit)*(durUnit/1000))
	c[pgColList] = appendText(c[pgColList], r.List)
	return ts
}

func appendInt4(b []byte, v int32) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

func appendInt8(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

// appendText appends a text field: s as text gives it.
func appendText(b []byte, s string) []byte {
	s = text(s)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendLowerASCII appends a text field of the ASCII string s in lower
// case, its NUL bytes dropped: text(strings.ToLower(s)) without the
// copies.
func appendLowerASCII(b []byte, s string) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0:
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// text is s as PostgreSQL's text takes it: invalid UTF-8 replaced, NUL
// dropped. It allocates only for such a string.
func text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// maintain deletes one chunk of the rows before cutoff, on one replica at
// a time: a replica that does not get the advisory lock leaves it to the
// one that has it. max_mib does not apply: the database's space is its
// administrator's. It measures the table's size for nxdns_history_bytes.
func (s *pgStore) maintain(cutoff time.Time, _ int64) (more bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgWriteTimeout)
	defer cancel()
	if err := s.ensure(ctx); err != nil {
		return false, err
	}
	defer s.measure(ctx)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, classifyPG(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(pgLockRetention)).Scan(&got); err != nil {
		return false, classifyPG(err)
	}
	if !got {
		return false, nil // another replica is at it
	}
	// A batch whose newest row is older than the cutoff, and so every
	// row of it; a batch that straddles the cutoff stays until its
	// newest row passes it (a batch spans a writer's wait, about
	// 100 ms, unless the database was away). pgDeleteBatches at a time.
	tag, err := tx.Exec(ctx, `DELETE FROM nxdns_history_batches WHERE id = ANY (ARRAY
		(SELECT id FROM nxdns_history_batches WHERE ts_max < $1 LIMIT $2))`, cutoff, pgDeleteBatches)
	if err != nil {
		return false, classifyPG(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, classifyPG(err)
	}
	return tag.RowsAffected() == pgDeleteBatches, nil
}

// pgDeleteBatches is how many batches maintain deletes a call: half a
// million rows at 20,000 a second (batches of about 2,000), a few hundred
// on a quiet network, where a batch may be one row.
const pgDeleteBatches = 256

func (s *pgStore) measure(ctx context.Context) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('nxdns_history_batches')`).Scan(&n); err == nil {
		s.bytes.Store(n)
	}
}

func (s *pgStore) size() int64 { return s.bytes.Load() }

// used is 0: max_mib is not enforced on a shared database, so the writer
// never runs maintenance for the size.
func (s *pgStore) used() int64 { return 0 }

func (s *pgStore) close() error {
	s.pool.Close()
	return nil
}

// where collects a query's conditions and their arguments.
type where struct {
	conds []string
	args  []any
}

// add appends a condition; each $ in cond is the next argument's
// placeholder.
func (w *where) add(cond string, args ...any) {
	for _, a := range args {
		w.args = append(w.args, a)
		cond = strings.Replace(cond, "$", "\x00"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, strings.ReplaceAll(cond, "\x00", "$"))
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// clone is a copy of w that conditions can be added to alone.
func (w *where) clone() *where {
	return &where{conds: slices.Clone(w.conds), args: slices.Clone(w.args)}
}

// arg adds an argument alone and returns its placeholder.
func (w *where) arg(a any) string {
	w.args = append(w.args, a)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) span(instance string, from, to time.Time) {
	if instance != "" {
		w.add("instance = $", instance)
	}
	// Each bound twice: on the batches, which their index finds before
	// any array is opened, and on the rows.
	if !from.IsZero() {
		w.add("batch_max >= $ AND ts >= $", from, from)
	}
	if !to.IsZero() {
		w.add("batch_min < $ AND ts < $", to, to)
	}
}

// read begins a read of the rows of instance in [from, to) (each zero:
// unbounded): its context, bounded by pgReadTimeout, and the where
// clause that selects them.
func (s *pgStore) read(ctx context.Context, instance string, from, to time.Time) (context.Context, context.CancelFunc, *where, error) {
	ctx, cancel := context.WithTimeout(ctx, pgReadTimeout)
	if err := s.ensure(ctx); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	w := new(where)
	w.span(instance, from, to)
	return ctx, cancel, w, nil
}

// A page of rows is read newest first one window of time at a time,
// each pgWindowGrowth times the one before, from pgFirstWindow back
// from the page's end (its cursor, To, or now) until the page is full;
// past pgLastWindow, or at From, the window reaches back to the oldest
// row. A block-range index gives no order (migration 4): each window's
// rows that match are sorted for their newest, so a window is kept small
// where rows are dense (20,000 a second: a first window of 20,000 rows)
// and grows fast where they are sparse or a filter matches few (nine
// windows at most read the whole table, each row once).
const (
	pgFirstWindow  = time.Second
	pgWindowGrowth = 8
	pgLastWindow   = 30 * 24 * time.Hour
)

func (s *pgStore) rowsOnce(ctx context.Context, f filter) (page, error) {
	ctx, cancel, w, err := s.read(ctx, f.Instance, time.Time{}, time.Time{})
	if err != nil {
		return page{}, err
	}
	defer cancel()
	end := f.To // the page's rows are before it; zero: none after
	if f.Client != "" {
		client := f.Client
		if a, err := parseAddr(client); err == nil {
			client = a
		}
		w.add("(client = $ OR lower(client_name) = lower($))", client, f.Client)
	}
	if f.Name != "" {
		w.add("strpos(qname, $) > 0", strings.ToLower(f.Name))
	}
	if f.Type != 0 {
		w.add("qtype = $", int32(f.Type))
	}
	if f.Source != "" {
		w.add("source = $", f.Source)
	}
	if f.Rcode >= 0 {
		w.add("rcode = $", int32(f.Rcode))
	}
	if f.Upstream != "" {
		w.add("upstream = $", f.Upstream)
	}
	if f.Cursor != 0 {
		ms := f.Cursor >> pgCursorBits
		from := time.UnixMilli(ms)
		in := new(where)
		in.args = w.args
		in.span("", from, from.Add(time.Millisecond))
		in.add("id & "+strconv.Itoa(pgCursorMask)+" = $", f.Cursor&pgCursorMask)
		w.args = in.args
		w.add("(ts, id) < (SELECT ts, id FROM nxdns_history" + in.sql() + " LIMIT 1)")
		if to := from.Add(time.Millisecond); end.IsZero() || to.Before(end) {
			end = to
		}
	}
	anchor := end
	if anchor.IsZero() {
		anchor = time.Now()
	}
	var out []entry
	hi, span := end, pgFirstWindow
	for {
		lo, last := anchor.Add(-span), span >= pgLastWindow
		if last || (!f.From.IsZero() && !lo.After(f.From)) {
			lo, last = f.From, true
		}
		win := w.clone()
		win.span("", lo, hi)
		var err error
		if out, err = s.window(ctx, win, f.Limit+1-len(out), out); err != nil {
			return page{}, err
		}
		if last || len(out) > f.Limit {
			return pageOf(out, f.Limit), nil
		}
		hi, span = lo, span*pgWindowGrowth
	}
}

// window appends to out the newest limit rows that w selects, newest
// first.
func (s *pgStore) window(ctx context.Context, w *where, limit int, out []entry) ([]entry, error) {
	q := `SELECT id, ts, instance, client, client_name, proto, qname, qtype, rcode, source, upstream, duration_us, list
		FROM nxdns_history` + w.sql() + ` ORDER BY ts DESC, id DESC LIMIT ` + w.arg(limit)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, classifyPG(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e            entry
			qtype, rcode int32
			us           int64
		)
		var id int64
		if err := rows.Scan(&id, &e.Time, &e.Instance, &e.Client, &e.ClientName, &e.Proto, &e.QName, &qtype, &rcode, &e.Source, &e.Upstream, &us, &e.List); err != nil {
			return nil, classifyPG(err)
		}
		e.Time = e.Time.UTC()
		e.key = pgCursor(e.Time, id)
		e.QType, e.Rcode, e.Duration = uint16(qtype), int(rcode), time.Duration(us)*time.Microsecond
		out = append(out, e)
	}
	return out, classifyPG(rows.Err())
}

// parseAddr spells an address as the writer does.
func parseAddr(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", err
	}
	return a.Unmap().String(), nil
}

func (s *pgStore) topOnce(ctx context.Context, what, instance string, from, to time.Time, limit int) ([]count, error) {
	ctx, cancel, w, err := s.read(ctx, instance, from, to)
	if err != nil {
		return nil, err
	}
	defer cancel()
	key := "qname"
	switch what {
	case TopDomains:
		w.add("(qname <> '' OR qtype <> 0)")
	case TopBlocked:
		w.add("(qname <> '' OR qtype <> 0)")
		w.add("source = 'blocked'")
	case TopClients:
		// Ranked by address, as SQLite ranks them.
		key = "CASE client WHEN '' THEN client_name ELSE client END"
	case TopUpstreams:
		key = "upstream"
		w.add("upstream <> ''")
	default:
		return nil, errors.New("history: unknown top list")
	}
	// Ties by the key's bytes, whatever the database's collation.
	q := `SELECT k, n FROM (SELECT ` + key + ` AS k, count(*) AS n FROM nxdns_history` + w.sql() +
		` GROUP BY 1) t ORDER BY n DESC, k COLLATE "C" LIMIT ` + w.arg(limit)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, classifyPG(err)
	}
	defer rows.Close()
	out := []count{}
	for rows.Next() {
		var c count
		if err := rows.Scan(&c.Key, &c.Count); err != nil {
			return nil, classifyPG(err)
		}
		out = append(out, c)
	}
	return out, classifyPG(rows.Err())
}

func (s *pgStore) timelineOnce(ctx context.Context, instance string, from, to time.Time, step time.Duration) ([]bucket, error) {
	st := step.Microseconds()
	first := floorDiv(from.UnixMicro(), st)
	out := emptyBuckets(from, to, step)
	ctx, cancel, w, err := s.read(ctx, instance, from, to)
	if err != nil {
		return nil, err
	}
	defer cancel()
	base, width := w.arg(first*st), w.arg(st)
	q := `SELECT ((extract(epoch FROM ts) * 1000000)::bigint - ` + base + `) / ` + width + ` AS b, source, rcode, count(*)
		FROM nxdns_history` + w.sql() + ` GROUP BY 1, 2, 3`
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, classifyPG(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			b, n  int64
			src   string
			rcode int32
		)
		if err := rows.Scan(&b, &src, &rcode, &n); err != nil {
			return nil, classifyPG(err)
		}
		if b >= 0 && b < int64(len(out)) {
			out[b].N[outcome(sourceCode(src), int(rcode))] += n
		}
	}
	return out, classifyPG(rows.Err())
}

// emptyBuckets are the timeline's buckets over [from, to), every count 0.
func emptyBuckets(from, to time.Time, step time.Duration) []bucket {
	st := step.Microseconds()
	first, last := floorDiv(from.UnixMicro(), st), floorDiv(to.UnixMicro()-1, st)
	out := make([]bucket, 0, last-first+1)
	for b := first; b <= last; b++ {
		out = append(out, bucket{Time: time.UnixMicro(b * st).UTC()})
	}
	return out
}

// again runs a read once more when it found the database unreachable:
// after the server restarted, every connection the pool holds is dead
// and fails once; the pool is emptied and the read made on a new one.
func again[T any](ctx context.Context, s *pgStore, read func() (T, error)) (T, error) {
	v, err := read()
	if errors.Is(err, errRetry) && ctx.Err() == nil {
		s.pool.Reset()
		v, err = read()
	}
	return v, err
}

func (s *pgStore) rows(ctx context.Context, f filter) (page, error) {
	return again(ctx, s, func() (page, error) { return s.rowsOnce(ctx, f) })
}

func (s *pgStore) top(ctx context.Context, what, instance string, from, to time.Time, limit int) ([]count, error) {
	return again(ctx, s, func() ([]count, error) { return s.topOnce(ctx, what, instance, from, to, limit) })
}

func (s *pgStore) timeline(ctx context.Context, instance string, from, to time.Time, step time.Duration) ([]bucket, error) {
	return again(ctx, s, func() ([]bucket, error) { return s.timelineOnce(ctx, instance, from, to, step) })
}
