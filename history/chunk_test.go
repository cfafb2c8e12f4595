package history

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A chunk gives back the rows it was made of, whatever their values, and
// its names search finds exactly the names that hold the substring.
func TestChunkRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfN(rapid.StringMatching(`[a-z0-9.-]{1,12}`), 1, 20).Draw(t, "names")
		n := rapid.IntRange(1, 300).Draw(t, "n")
		key := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "first")
		var rows []chunkRow
		for range n {
			r := chunkRow{
				key:      key,
				client:   rapid.Int64Range(1, 1<<40).Draw(t, "client"),
				qtype:    rapid.Int64Range(0, 65535).Draw(t, "qtype"),
				flags:    rapid.Int64Range(0, 1<<20).Draw(t, "flags"),
				upstream: rapid.Int64Range(-1, 1000).Draw(t, "upstream"),
				list:     rapid.Int64Range(-1, 1000).Draw(t, "list"),
				dur:      rapid.Int64Range(0, 1<<40).Draw(t, "dur"),
			}
			if rapid.Bool().Draw(t, "named") {
				r.name = names[rapid.IntRange(0, len(names)-1).Draw(t, "name")]
			}
			rows = append(rows, r)
			key += rapid.Int64Range(1, 1<<30).Draw(t, "gap")
		}
		var e encoder
		nb, cb := e.encode(rows)
		nb, cb = slices.Clone(nb), slices.Clone(cb)
		var c chunk
		if err := c.parse(rows[0].key, nb, cb); err != nil {
			t.Fatal(err)
		}
		got, err := c.rows(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, rows) {
			t.Fatalf("rows changed:\n got %v\nwant %v", got, rows)
		}
		sub := rapid.StringMatching(`[a-z0-9.]{1,3}`).Draw(t, "sub")
		var want []int64
		for _, r := range rows {
			if r.name != "" && strings.Contains(r.name, sub) {
				want = append(want, int64(e.index[r.name]))
			}
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if found := matchNames(nb, sub, nil); !slices.Equal(found, want) {
			t.Fatalf("names with %q: %v, want %v", sub, found, want)
		}
	})
}

// A damaged chunk is an error, never a panic or a row made up.
func FuzzChunkParse(f *testing.F) {
	var e encoder
	nb, cb := e.encode([]chunkRow{{key: 5, name: "a.example.", client: 1, upstream: -1, list: 2}, {key: 9, client: 3, upstream: 1, list: -1}})
	f.Add(slices.Clone(nb), slices.Clone(cb))
	f.Add([]byte{}, []byte{chunkFormat, 1})
	f.Fuzz(func(t *testing.T, names, cols []byte) {
		var c chunk
		if err := c.parse(0, names, cols); err != nil {
			return
		}
		rows, err := c.rows(nil)
		if err == nil && len(rows) != c.n {
			t.Fatalf("%d rows decoded, the chunk says %d", len(rows), c.n)
		}
		matchNames(names, "a", nil)
	})
}
