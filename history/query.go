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

// maxNameIDs is the most names a name filter looks up one by one in the
// name index; a substring that matches more (".com") is common enough
// that scanning the newest rows finds a page sooner.
const maxNameIDs = 2000

// clientMinutes is how many of a client's minutes one step of the client
// filter reads from seen.
const clientMinutes = 256

const rowColumns = `SELECT q.id, n.name, c.addr, c.name, q.qtype, q.flags, u.text, l.text, q.dur FROM q
	LEFT JOIN names n ON n.id = q.name LEFT JOIN clients c ON c.id = q.client
	LEFT JOIN labels u ON u.id = q.upstream LEFT JOIN labels l ON l.id = q.list `

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

// residual is the SQL of the filters checked on each row.
type residual struct {
	where strings.Builder
	args  []any
}

func (r *residual) add(cond string, args ...any) {
	r.where.WriteString(" AND ")
	r.where.WriteString(cond)
	r.args = append(r.args, args...)
}

func inList(col string, ids []int64) (string, []any) {
	var b strings.Builder
	b.WriteString(col)
	b.WriteString(" IN (")
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = id
	}
	b.WriteByte(')')
	return b.String(), args
}

func (s *sqliteStore) rows(ctx context.Context, f filter) (page, error) {
	lo, hi := s.bounds(f)
	var res residual
	if f.Type != 0 {
		res.add("q.qtype = ?", int64(f.Type))
	}
	if f.Source != "" {
		code := sourceCode(f.Source)
		if sources[code] != f.Source {
			return page{}, nil // no row has a source this version does not know
		}
		res.add("(q.flags >> 3) & 15 = ?", code)
	}
	if f.Rcode >= 0 {
		res.add("q.flags >> 7 = ?", f.Rcode)
	}
	if f.Upstream != "" {
		var id int64
		err := s.r.QueryRowContext(ctx, `SELECT id FROM labels WHERE text = ?`, f.Upstream).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return page{}, nil
		} else if err != nil {
			return page{}, err
		}
		res.add("q.upstream = ?", id)
	}
	var clients []int64
	if f.Client != "" {
		var err error
		if clients, err = s.clientIDs(ctx, f.Client); err != nil {
			return page{}, err
		}
		if len(clients) == 0 {
			return page{}, nil
		}
		cond, args := inList("q.client", clients)
		res.add(cond, args...)
	}
	want := f.Limit + 1 // one more says whether there is a page after
	var out []entry
	var err error
	switch {
	case f.Name != "":
		out, err = s.byName(ctx, f.Name, lo, hi, &res, want)
	case len(clients) > 0:
		out, err = s.byClient(ctx, clients, lo, hi, &res, want)
	default:
		out, err = s.scan(ctx, lo, hi, &res, "", nil, want)
	}
	if err != nil {
		return page{}, err
	}
	var p page
	if len(out) > f.Limit {
		out = out[:f.Limit]
		p.Next = out[len(out)-1].key
	}
	p.Rows = out
	return p, nil
}

// scan reads the newest rows in [lo, hi) that match res and extra.
func (s *sqliteStore) scan(ctx context.Context, lo, hi int64, res *residual, extra string, extraArgs []any, want int) ([]entry, error) {
	q := rowColumns + `WHERE q.id >= ? AND q.id < ?` + extra + res.where.String() + ` ORDER BY q.id DESC LIMIT ?`
	args := append([]any{lo, hi}, extraArgs...)
	args = append(args, res.args...)
	args = append(args, want)
	return s.query(ctx, q, args...)
}

func (s *sqliteStore) query(ctx context.Context, q string, args ...any) ([]entry, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []entry
	for rows.Next() {
		var (
			key, qtype, fl, dur         int64
			name, addr, cname, up, list sql.NullString
		)
		if err := rows.Scan(&key, &name, &addr, &cname, &qtype, &fl, &up, &list, &dur); err != nil {
			return nil, err
		}
		proto, src, rcode := unflags(fl)
		out = append(out, entry{
			key: key, Time: s.time(key), Client: addr.String, ClientName: cname.String,
			Proto: protos[proto], QName: name.String, QType: uint16(qtype), Rcode: rcode,
			Source: sources[src], Upstream: up.String, List: list.String,
			Duration: time.Duration(dur) * durUnit,
		})
	}
	return out, rows.Err()
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

// byName finds the names that contain the substring in the dictionary,
// then their newest rows through the name index, each name's on its own,
// merged; a substring matching very many names scans the newest rows
// instead.
func (s *sqliteStore) byName(ctx context.Context, sub string, lo, hi int64, res *residual, want int) ([]entry, error) {
	pattern := "%" + likeEscaper.Replace(strings.ToLower(sub)) + "%"
	ids, err := s.ids(ctx, `SELECT id FROM names WHERE name LIKE ? ESCAPE '\' LIMIT ?`, pattern, maxNameIDs+1)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	if len(ids) > maxNameIDs {
		return s.scan(ctx, lo, hi, res, ` AND n.name LIKE ? ESCAPE '\'`, []any{pattern}, want)
	}
	var keys []int64
	q := `SELECT q.id FROM q WHERE q.name = ? AND q.id >= ? AND q.id < ?` + res.where.String() + ` ORDER BY q.id DESC LIMIT ?`
	for _, id := range ids {
		args := append([]any{id, lo, hi}, res.args...)
		args = append(args, want)
		got, err := s.ids(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		keys = append(keys, got...)
		if len(keys) > 4*want {
			slices.Sort(keys)
			keys = keys[len(keys)-want:]
		}
	}
	slices.Sort(keys)
	if len(keys) > want {
		keys = keys[len(keys)-want:]
	}
	if len(keys) == 0 {
		return nil, nil
	}
	cond, args := inList("q.id", keys)
	return s.query(ctx, rowColumns+`WHERE `+cond+` ORDER BY q.id DESC`, args...)
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// byClient reads the client's rows minute by minute, newest first, only
// in the minutes seen says it asked in: a quiet client's page costs the
// rows of a few minutes, not a scan of the week.
func (s *sqliteStore) byClient(ctx context.Context, clients []int64, lo, hi int64, res *residual, want int) ([]entry, error) {
	cond, cargs := inList("key", clients)
	var out []entry
	top := floorDiv(hi-1, usPerMinute)
	bottom := floorDiv(lo, usPerMinute)
	for len(out) < want && top >= bottom {
		args := append([]any{bottom, top}, cargs...)
		args = append(args, clientMinutes)
		minutes, err := s.ids(ctx, `SELECT DISTINCT minute FROM seen WHERE what = 0 AND minute >= ? AND minute <= ? AND `+cond+` ORDER BY minute DESC LIMIT ?`, args...)
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
			got, err := s.scan(ctx, rlo, rhi, res, "", nil, want-len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
			i = j + 1
		}
		top = minutes[len(minutes)-1] - 1
	}
	return out, nil
}
