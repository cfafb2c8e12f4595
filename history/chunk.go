package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sort"
)

// A chunk is up to chunkRows rows, sorted by key, stored as one row of the
// chunks table: two blobs, so that a name search reads the names alone.
//
//   - names: the chunk's own dictionary, every distinct name of its rows
//     once, each followed by a zero byte (names as the writer spells them
//     have none);
//   - cols: the rows, a column at a time (so that a filter decodes only
//     the columns it reads): a format byte, the number of rows, then each
//     column as its length and its unsigned varints: the key's distance
//     from the row before (the first's from the chunk's key), the name's
//     index in names plus one (0: none), the client's id, the type,
//     flags, the upstream's and the list's label id plus one (0: none),
//     the duration in 10 µs units.
//
// A row costs about a byte a column, and its name's bytes once a chunk:
// far less than a row of a table with an index (docs/history.md).
const chunkFormat = 1

// Columns of cols, in order.
const (
	colKey = iota
	colName
	colClient
	colType
	colFlags
	colUpstream
	colList
	colDur
	numCols
)

// chunkRow is one row as a chunk holds it; name is "" for none.
type chunkRow struct {
	key      int64
	name     string
	client   int64
	qtype    int64
	flags    int64
	upstream int64 // -1: none
	list     int64 // -1: none
	dur      int64
}

// encoder builds chunks, its buffers reused.
type encoder struct {
	names   bytes.Buffer
	index   map[string]uint64
	cols    [numCols][]byte
	out     []byte
	scratch [binary.MaxVarintLen64]byte
}

// encode returns the names and cols blobs of rows (sorted by key, the
// first's key the chunk's), valid until the next call.
func (e *encoder) encode(rows []chunkRow) (names, cols []byte) {
	if e.index == nil {
		e.index = make(map[string]uint64)
	}
	clear(e.index)
	e.names.Reset()
	for i := range e.cols {
		e.cols[i] = e.cols[i][:0]
	}
	prev := rows[0].key
	for i := range rows {
		r := &rows[i]
		var ni uint64
		if r.name != "" {
			var ok bool
			if ni, ok = e.index[r.name]; !ok {
				ni = uint64(len(e.index)) + 1
				e.index[r.name] = ni
				e.names.WriteString(r.name)
				e.names.WriteByte(0)
			}
		}
		e.cols[colKey] = binary.AppendUvarint(e.cols[colKey], uint64(r.key-prev))
		prev = r.key
		e.cols[colName] = binary.AppendUvarint(e.cols[colName], ni)
		e.cols[colClient] = binary.AppendUvarint(e.cols[colClient], uint64(r.client))
		e.cols[colType] = binary.AppendUvarint(e.cols[colType], uint64(r.qtype))
		e.cols[colFlags] = binary.AppendUvarint(e.cols[colFlags], uint64(r.flags))
		e.cols[colUpstream] = binary.AppendUvarint(e.cols[colUpstream], uint64(r.upstream+1))
		e.cols[colList] = binary.AppendUvarint(e.cols[colList], uint64(r.list+1))
		e.cols[colDur] = binary.AppendUvarint(e.cols[colDur], uint64(max(r.dur, 0)))
	}
	out := append(e.out[:0], chunkFormat)
	out = binary.AppendUvarint(out, uint64(len(rows)))
	for _, c := range e.cols {
		out = binary.AppendUvarint(out, uint64(len(c)))
	}
	for _, c := range e.cols {
		out = append(out, c...)
	}
	e.out = out
	return e.names.Bytes(), out
}

var errChunk = errors.New("history: a chunk of rows is damaged")

// chunk is a stored chunk being read: its blobs and the columns decoded
// so far.
type chunk struct {
	id    int64 // the first row's key
	n     int
	names []byte
	col   [numCols][]byte // each column's varints
	vals  [numCols][]int64
	done  [numCols]bool
	dict  [][2]int32 // where each name is in names
}

// parse reads cols' header; the columns are decoded when asked for.
func (c *chunk) parse(id int64, names, cols []byte) error {
	c.id, c.names = id, names
	c.done = [numCols]bool{}
	c.dict = c.dict[:0]
	if len(cols) < 1 || cols[0] != chunkFormat {
		return errChunk
	}
	p := cols[1:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > 1<<20 {
		return errChunk
	}
	p = p[k:]
	c.n = int(n)
	var lens [numCols]uint64
	for i := range lens {
		l, k := binary.Uvarint(p)
		if k <= 0 {
			return errChunk
		}
		lens[i], p = l, p[k:]
	}
	for i, l := range lens {
		if l > uint64(len(p)) {
			return errChunk
		}
		c.col[i], p = p[:l], p[l:]
	}
	return nil
}

// column decodes column i (keys made absolute) and returns it.
func (c *chunk) column(i int) ([]int64, error) {
	if c.done[i] {
		return c.vals[i], nil
	}
	v := c.vals[i][:0]
	p := c.col[i]
	acc := c.id
	for range c.n {
		x, k := binary.Uvarint(p)
		if k <= 0 {
			return nil, errChunk
		}
		p = p[k:]
		if i == colKey {
			acc += int64(x)
			v = append(v, acc)
		} else {
			v = append(v, int64(x))
		}
	}
	c.vals[i], c.done[i] = v, true
	return v, nil
}

// nameBytes is the chunk's name of a names column value, nil for none:
// valid while the chunk's blobs are.
func (c *chunk) nameBytes(v int64) []byte {
	if v == 0 {
		return nil
	}
	if len(c.dict) == 0 && len(c.names) > 0 {
		for at := 0; at < len(c.names); {
			i := bytes.IndexByte(c.names[at:], 0)
			if i < 0 {
				break
			}
			c.dict = append(c.dict, [2]int32{int32(at), int32(at + i)})
			at += i + 1
		}
	}
	if v > int64(len(c.dict)) {
		return nil
	}
	d := c.dict[v-1]
	return c.names[d[0]:d[1]]
}

// name is nameBytes as a string of its own.
func (c *chunk) name(v int64) string { return string(c.nameBytes(v)) }

// matchNames returns the names column values (indexes plus one) of the
// chunk's names that contain sub, in order, appended to into.
func matchNames(names []byte, sub string, into []int64) []int64 {
	if sub == "" || len(names) == 0 {
		return into
	}
	var starts []int // lazily: the start of each name, for a hit's index
	for off := 0; off < len(names); {
		i := bytes.Index(names[off:], []byte(sub))
		if i < 0 {
			break
		}
		at := off + i
		if starts == nil {
			starts = append(starts, 0)
			for j, b := range names {
				if b == 0 && j+1 < len(names) {
					starts = append(starts, j+1)
				}
			}
		}
		idx := sort.SearchInts(starts, at+1) - 1 // the name the hit is in
		into = append(into, int64(idx)+1)
		// On to the next name: a name counts once.
		end := bytes.IndexByte(names[at:], 0)
		if end < 0 {
			break
		}
		off = at + end + 1
	}
	return into
}

// contains reports whether the sorted values hold v.
func contains(sorted []int64, v int64) bool {
	_, ok := slices.BinarySearch(sorted, v)
	return ok
}

// rows decodes every row of the chunk, appended to into.
func (c *chunk) rows(into []chunkRow) ([]chunkRow, error) {
	if err := c.decode(); err != nil {
		return into, err
	}
	for j := range c.n {
		into = append(into, c.row(j))
	}
	return into, nil
}

// decode decodes every column.
func (c *chunk) decode() error {
	for i := range numCols {
		if _, err := c.column(i); err != nil {
			return err
		}
	}
	return nil
}

// row is row j, the columns decoded.
func (c *chunk) row(j int) chunkRow {
	v := &c.vals
	return chunkRow{
		key: v[colKey][j], name: c.name(v[colName][j]), client: v[colClient][j],
		qtype: v[colType][j], flags: v[colFlags][j], upstream: v[colUpstream][j] - 1,
		list: v[colList][j] - 1, dur: v[colDur][j],
	}
}
