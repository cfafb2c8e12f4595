package wire

import "math/rand/v2"

// udpIDs is a shared socket's record of its wire IDs: every ID it has used
// (a bitmap, since each is used once per socket) and the exchanges waiting,
// by ID. The waiting ones are in an open-addressing table with linear
// probing: IDs are drawn at random, so their low bits spread them without
// hashing. It replaced a map[uint16]*udpWait of every used ID, whose
// lookups and inserts were about a twentieth of a forwarded query's CPU.
//
// The caller synchronises (the transport's lock).
type udpIDs struct {
	used  [1 << 16 / 64]uint64
	count int        // IDs used
	live  int        // entries in table
	table []udpEntry // length a power of two, at least twice live; nil until the first add
}

// udpEntry is one waiting exchange; w is nil in an empty place.
type udpEntry struct {
	w  *udpWait
	id uint16
}

// udpIDsTable is the table's first length: room for the shipped slots.
const udpIDsTable = 64

// add files w under a random ID this socket has never used, and returns it.
// The caller makes sure that an unused one is left (count well below 65536).
func (t *udpIDs) add(w *udpWait) uint16 {
	var id uint16
	for {
		id = uint16(rand.Uint32())
		if t.used[id/64]&(1<<(id%64)) == 0 {
			break
		}
	}
	t.used[id/64] |= 1 << (id % 64)
	t.count++
	if 2*(t.live+1) > len(t.table) {
		t.grow()
	}
	mask := len(t.table) - 1
	i := int(id) & mask
	for t.table[i].w != nil {
		i = (i + 1) & mask
	}
	t.table[i] = udpEntry{w: w, id: id}
	t.live++
	return id
}

// grow doubles the table (or makes its first) and places the entries again.
func (t *udpIDs) grow() {
	old := t.table
	t.table = make([]udpEntry, max(udpIDsTable, 2*len(old)))
	mask := len(t.table) - 1
	for _, e := range old {
		if e.w == nil {
			continue
		}
		i := int(e.id) & mask
		for t.table[i].w != nil {
			i = (i + 1) & mask
		}
		t.table[i] = e
	}
}

// find returns the place of id's waiting exchange, or -1.
func (t *udpIDs) find(id uint16) int {
	if t.live == 0 {
		return -1
	}
	mask := len(t.table) - 1
	for i := int(id) & mask; t.table[i].w != nil; i = (i + 1) & mask {
		if t.table[i].id == id {
			return i
		}
	}
	return -1
}

// get returns the exchange waiting under id, or nil: an ID never used, or
// one whose exchange has ended.
func (t *udpIDs) get(id uint16) *udpWait {
	if i := t.find(id); i >= 0 {
		return t.table[i].w
	}
	return nil
}

// remove ends id's wait; the ID stays used. Later entries of the probe run
// move back into the gap, so that every entry stays reachable from its home
// place without tombstones.
func (t *udpIDs) remove(id uint16) {
	i := t.find(id)
	if i < 0 {
		return
	}
	mask := len(t.table) - 1
	for j := (i + 1) & mask; t.table[j].w != nil; j = (j + 1) & mask {
		home := int(t.table[j].id) & mask
		// The entry at j may fill the gap at i unless its home lies
		// cyclically in (i, j]: then it would move before its home.
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		t.table[i] = t.table[j]
		i = j
	}
	t.table[i] = udpEntry{}
	t.live--
}
