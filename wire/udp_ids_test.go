package wire

import (
	"testing"

	"pgregory.net/rapid"
)

// udpIDs behaves as the map it replaced: every ID handed out is fresh, a
// waiting exchange is found under its ID until removed and never after,
// and the table grows and shrinks its runs without losing an entry.
func TestUDPIDsAgainstAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ids udpIDs
		model := map[uint16]*udpWait{} // every ID used: its wait, or nil once removed
		for step := range rapid.IntRange(1, 600).Draw(t, "steps") {
			live := make([]uint16, 0, len(model))
			for id, w := range model {
				if w != nil {
					live = append(live, id)
				}
			}
			switch {
			case len(live) == 0 || rapid.IntRange(0, 2).Draw(t, "op") > 0 && len(model) < 4096:
				w := &udpWait{}
				id := ids.add(w)
				if _, used := model[id]; used {
					t.Fatalf("step %d: ID %d handed out twice", step, id)
				}
				model[id] = w
			default:
				id := rapid.SampledFrom(live).Draw(t, "remove")
				ids.remove(id)
				model[id] = nil
			}
			// A stray ID, never used or ended, finds nobody.
			probe := uint16(rapid.Uint32().Draw(t, "probe"))
			if got := ids.get(probe); got != model[probe] {
				t.Fatalf("step %d: get(%d) = %p, want %p", step, probe, got, model[probe])
			}
		}
		n := 0
		for id, w := range model {
			if got := ids.get(id); got != w {
				t.Fatalf("get(%d) = %p, want %p", id, got, w)
			}
			if w != nil {
				n++
			}
		}
		if ids.live != n || ids.count != len(model) {
			t.Fatalf("live %d, count %d; want %d, %d", ids.live, ids.count, n, len(model))
		}
		for _, e := range ids.table {
			if e.w != nil && model[e.id] != e.w {
				t.Fatalf("table holds %d -> %p, model %p", e.id, e.w, model[e.id])
			}
		}
	})
}

// Removal keeps every entry reachable when runs wrap around the table's
// end: IDs chosen to share home places at the last index.
func TestUDPIDsRemoveAcrossTheWrap(t *testing.T) {
	var ids udpIDs
	ids.grow()
	mask := uint16(len(ids.table) - 1)
	// Place entries by hand: homes at mask, mask, 0, mask (a run wrapping).
	entries := []uint16{mask, mask + 1 + mask, 0 + 2*(mask+1), mask + 3*(mask+1)}
	waits := map[uint16]*udpWait{}
	for _, id := range entries {
		w := &udpWait{}
		waits[id] = w
		i := int(id & mask)
		for ids.table[i].w != nil {
			i = (i + 1) & int(mask)
		}
		ids.table[i] = udpEntry{w: w, id: id}
		ids.live++
	}
	ids.remove(entries[0])
	delete(waits, entries[0])
	for id, w := range waits {
		if got := ids.get(id); got != w {
			t.Errorf("after removing %d: get(%d) = %p, want %p", entries[0], id, got, w)
		}
	}
	if ids.get(entries[0]) != nil {
		t.Errorf("the removed ID is still found")
	}
}
