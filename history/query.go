package history

import (
	"context"
	"database/sql"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// clientMinutes is how many of a client's minutes one step of the client
// filter reads from seen.
const clientMinutes = 256

// bounds are a filter's key range [lo, hi).
func (s *sqliteStore) bounds(f filter) (lo, hi int64) {
	lo, hi = -1<<62, 1<<62
	if !f.From.IsZero() {
		lo = s.key(f.From)
	}
	if !f.To.IsZero() {
		hi = s.key(f.To)
	}
	if f.Cursor != 0 {
		hi = min(hi, f.Cursor)
	}
	return lo, hi
}

// matcher is a filter as the chunks' columns hold it.
type matcher struct {
	name     string  // lower case; "" any
	clients  []int64 // sorted; nil any
	qtype    int64   // 0 any
	source   int     // -1 any
	rcode    int     // -1 any
	upstream int64   // -1 any
}

func (s *sqliteStore) rows(ctx context.Context, f filter) (page, error) {
	lo, hi := s.bounds(f)
	m := matcher{name: strings.ToLower(f.Name), qtype: int64(f.Type), source: -1, rcode: f.Rcode, upstream: -1}
	if strings.IndexByte(m.name, 0) >= 0 {
		return page{}, nil // no name holds a zero byte
	}
	if f.Source != "" {
		code := sourceCode(f.Source)
		if sources[code] != f.Source {
			return page{}, nil // no row has a source this version does not know
		}
		m.source = code
	}
	if f.Upstream != "" {
		err := s.r.QueryRowContext(ctx, `SELECT id FROM labels WHERE text = ?`, f.Upstream).Scan(&m.upstream)
		if errors.Is(err, sql.ErrNoRows) {
			return page{}, nil
		} else if err != nil {
			return page{}, err
		}
	}
	if f.Client != "" {
		var err error
		if m.clients, err = s.clientIDs(ctx, f.Client); err != nil {
			return page{}, err
		}
		if len(m.clients) == 0 {
			return page{}, nil
		}
		slices.Sort(m.clients)
	}
	want := f.Limit + 1 // one more says whether there is a page after
	var got []chunkRow
	var err error
	if m.clients != nil {
		got, err = s.byClient(ctx, &m, lo, hi, want)
	} else {
		got, err = s.scan(ctx, &m, lo, hi, want, nil)
	}
	if err != nil {
		return page{}, err
	}
	out, err := s.entries(ctx, got)
	if err != nil {
		return page{}, err
	}
	return pageOf(out, f.Limit), nil
}

// chunkHead is a chunk's row in the table without its blobs.
type chunkHead struct {
	id, first, last int64
	sealed          bool
}

// heads are the chunks that may hold keys in [lo, hi), newest first: the
// small ones, then the sealed ones.
func (s *sqliteStore) heads(ctx context.Context, lo, hi int64) ([]chunkHead, error) {
	snap, err := s.index.load(ctx, s.r)
	if err != nil {
		return nil, err
	}
	var out []chunkHead
	for i := len(snap.smalls) - 1; i >= 0; i-- {
		if h := snap.smalls[i]; h.first < hi && h.last >= lo {
			out = append(out, h)
		}
	}
	sealed := snap.overlapping(lo, hi)
	for i := len(sealed) - 1; i >= 0; i-- {
		out = append(out, sealed[i])
	}
	return out, nil
}

// scan appends to into the newest rows in [lo, hi) that m matches, until
// want rows are there.
func (s *sqliteStore) scan(ctx context.Context, m *matcher, lo, hi int64, want int, into []chunkRow) ([]chunkRow, error) {
	heads, err := s.heads(ctx, lo, hi)
	if err != nil {
		return into, err
	}
	var c chunk
	var names []int64
	var small []chunkRow // the small chunks' matches, sorted at their end
	newest := func() {   // small's newest want matches, newest first
		slices.SortFunc(small, func(a, b chunkRow) int { return cmpKey(b.key, a.key) })
		small = small[:min(len(small), want-len(into))]
	}
	for i, h := range heads {
		if len(into) >= want {
			break
		}
		if !h.sealed && len(small) >= want-len(into) && h.last < small[len(small)-1].key {
			// Every row of this small chunk is older than the matches
			// kept: none of them can be on the page.
			if i+1 == len(heads) || heads[i+1].sealed {
				into = append(into, small...)
			}
			continue
		}
		err := s.blobs(ctx, h.id, m.name == "", func(nb, cb []byte) (bool, error) {
			if m.name != "" {
				// The chunk's names first: most chunks hold none that match.
				if names = matchNames(nb, m.name, names[:0]); len(names) == 0 {
					return false, nil
				}
				if cb == nil {
					return true, nil // and then its rows
				}
			}
			if err := c.parse(h.first, nb, cb); err != nil {
				return false, err
			}
			var err error
			if h.sealed {
				into, err = c.match(m, names, lo, hi, want-len(into), into)
			} else {
				// The chunk's newest want at most, and of all the small
				// chunks' so far the newest want.
				small, err = c.match(m, names, lo, hi, want-len(into), small)
				newest()
			}
			return false, err
		})
		if err != nil {
			return into, err
		}
		if !h.sealed && (i+1 == len(heads) || heads[i+1].sealed) {
			// The small chunks are done: their rows, newest first.
			newest()
			into = append(into, small...)
		}
	}
	return into, nil
}

// blobs calls fn with chunk id's names blob, and its cols blob when cols
// is true or fn asks for it (returning true) after seeing the names
// alone. The blobs are valid only during fn. A chunk gone since its head
// was read (merged, deleted) is skipped.
func (s *sqliteStore) blobs(ctx context.Context, id int64, cols bool, fn func(names, cols []byte) (bool, error)) error {
	for {
		q := `SELECT names, NULL FROM chunks WHERE id = ?`
		if cols {
			q = `SELECT names, cols FROM chunks WHERE id = ?`
		}
		rows, err := s.r.QueryContext(ctx, q, id)
		if err != nil {
			return err
		}
		var more bool
		if rows.Next() {
			var nb, cb sql.RawBytes
			if err = rows.Scan(&nb, &cb); err == nil {
				if !cols {
					cb = nil
				}
				more, err = fn(nb, cb)
			}
		}
		err = errors.Join(err, rows.Close(), rows.Err())
		if err != nil || !more || cols {
			return err
		}
		cols = true
	}
}

// match appends to into, newest first, at most n rows of the chunk in
// [lo, hi) that m matches; names are the chunk's names that contain
// m.name, sorted.
func (c *chunk) match(m *matcher, names []int64, lo, hi int64, n int, into []chunkRow) ([]chunkRow, error) {
	keys, err := c.column(colKey)
	if err != nil {
		return into, err
	}
	var nameCol, clientCol, typeCol, flagCol, upCol []int64
	if m.name != "" {
		if nameCol, err = c.column(colName); err != nil {
			return into, err
		}
	}
	if m.clients != nil {
		if clientCol, err = c.column(colClient); err != nil {
			return into, err
		}
	}
	if m.qtype != 0 {
		if typeCol, err = c.column(colType); err != nil {
			return into, err
		}
	}
	if m.source >= 0 || m.rcode >= 0 {
		if flagCol, err = c.column(colFlags); err != nil {
			return into, err
		}
	}
	if m.upstream >= 0 {
		if upCol, err = c.column(colUpstream); err != nil {
			return into, err
		}
	}
	var found []int
	for j := c.n - 1; j >= 0 && len(found) < n; j-- {
		k := keys[j]
		if k >= hi {
			continue
		}
		if k < lo {
			break
		}
		if nameCol != nil && !contains(names, nameCol[j]) {
			continue
		}
		if clientCol != nil && !contains(m.clients, clientCol[j]) {
			continue
		}
		if typeCol != nil && typeCol[j] != m.qtype {
			continue
		}
		if flagCol != nil {
			_, src, rcode := unflags(flagCol[j])
			if m.source >= 0 && src != m.source || m.rcode >= 0 && rcode != m.rcode {
				continue
			}
		}
		if upCol != nil && upCol[j]-1 != m.upstream {
			continue
		}
		found = append(found, j)
	}
	if len(found) == 0 {
		return into, nil
	}
	if err := c.decode(); err != nil {
		return into, err
	}
	for _, j := range found {
		into = append(into, c.row(j))
	}
	return into, nil
}

// entries are rows as the API returns them, with their clients' and
// labels' text.
func (s *sqliteStore) entries(ctx context.Context, rows []chunkRow) ([]entry, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var cids, lids []int64
	for _, r := range rows {
		cids = append(cids, r.client)
		if r.upstream >= 0 {
			lids = append(lids, r.upstream)
		}
		if r.list >= 0 {
			lids = append(lids, r.list)
		}
	}
	type client struct{ addr, name string }
	clients := map[int64]client{}
	labels := map[int64]string{}
	if err := s.each(ctx, `SELECT id, addr, name FROM clients WHERE id IN `, cids, func(rows *sql.Rows) error {
		var id int64
		var c client
		err := rows.Scan(&id, &c.addr, &c.name)
		clients[id] = c
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.each(ctx, `SELECT id, text FROM labels WHERE id IN `, lids, func(rows *sql.Rows) error {
		var id int64
		var t string
		err := rows.Scan(&id, &t)
		labels[id] = t
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(rows))
	for _, r := range rows {
		proto, src, rcode := unflags(r.flags)
		c := clients[r.client]
		e := entry{
			key: r.key, Time: s.time(r.key), Client: c.addr, ClientName: c.name,
			Proto: protos[proto], QName: r.name, QType: uint16(r.qtype), Rcode: rcode,
			Source: sources[src], Duration: time.Duration(r.dur) * durUnit,
		}
		if r.upstream >= 0 {
			e.Upstream = labels[r.upstream]
		}
		if r.list >= 0 {
			e.List = labels[r.list]
		}
		out = append(out, e)
	}
	return out, nil
}

// each runs q, ending in "IN ", over the distinct ids, calling fn for
// each row.
func (s *sqliteStore) each(ctx context.Context, q string, ids []int64, fn func(*sql.Rows) error) error {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(q)
	b.WriteByte('(')
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = id
	}
	b.WriteByte(')')
	rows, err := s.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// clientIDs are the clients whose address or name is client.
func (s *sqliteStore) clientIDs(ctx context.Context, client string) ([]int64, error) {
	if a, err := netip.ParseAddr(client); err == nil {
		client = a.Unmap().String() // as the writer spells it
	}
	return s.ids(ctx, `SELECT id FROM clients WHERE addr = ?1 OR name = ?1 COLLATE NOCASE`, client)
}

func (s *sqliteStore) ids(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// byClient reads the client's rows minute by minute, newest first, only
// in the minutes seen says it asked in: a quiet client's page costs the
// chunks of a few minutes, not a scan of the week.
func (s *sqliteStore) byClient(ctx context.Context, m *matcher, lo, hi int64, want int) ([]chunkRow, error) {
	var cond strings.Builder
	cargs := make([]any, 0, len(m.clients))
	cond.WriteString("key IN (")
	for i, id := range m.clients {
		if i > 0 {
			cond.WriteByte(',')
		}
		cond.WriteByte('?')
		cargs = append(cargs, id)
	}
	cond.WriteByte(')')
	var out []chunkRow
	top := floorDiv(hi-1, usPerMinute)
	bottom := floorDiv(lo, usPerMinute)
	for len(out) < want && top >= bottom {
		args := append([]any{bottom, top}, cargs...)
		args = append(args, clientMinutes)
		minutes, err := s.ids(ctx, `SELECT DISTINCT minute FROM seen WHERE what = 0 AND minute >= ? AND minute <= ? AND `+cond.String()+` ORDER BY minute DESC LIMIT ?`, args...)
		if err != nil {
			return nil, err
		}
		if len(minutes) == 0 {
			break
		}
		// Runs of adjacent minutes are read as one range.
		for i := 0; i < len(minutes) && len(out) < want; {
			j := i
			for j+1 < len(minutes) && minutes[j+1] == minutes[j]-1 {
				j++
			}
			rlo, rhi := max(lo, minutes[j]*usPerMinute), min(hi, (minutes[i]+1)*usPerMinute)
			if out, err = s.scan(ctx, m, rlo, rhi, want, out); err != nil {
				return nil, err
			}
			i = j + 1
		}
		top = minutes[len(minutes)-1] - 1
	}
	return out, nil
}
