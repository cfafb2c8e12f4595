package daemon

import (
	"errors"
	"net/netip"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/query"
)

var errTest = errors.New("a pool error")

func netipPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// Every word of the query path has the code of its place in knownWords,
// and reads back as itself; query.CacheStale is query.SourceStale's
// word. Mutation check: swapping two cases of wordCode's switch fails.
func TestWordCodesMatchTable(t *testing.T) {
	t.Parallel()
	for i, w := range knownWords {
		if c := wordCode(w); int(c) != i || word(c) != w {
			t.Errorf("%q: code %d (want %d), reads back %q", w, c, i, word(c))
		}
	}
	if word(wordCode(query.CacheStale)) != query.CacheStale {
		t.Errorf("%q reads back %q", query.CacheStale, word(wordCode(query.CacheStale)))
	}
}

// A word no table holds gets a code of its own the first time and the
// same one after, and reads back as itself; the ring's kept entry is the
// size its cache lines were counted for.
func TestWordsBeyondTheTable(t *testing.T) {
	t.Parallel()
	w := "a-word-" + strconv.FormatInt(time.Now().UnixNano(), 36) // no other test's
	c := wordCode(w)
	if int(c) < len(knownWords) || c == 255 || wordCode(w) != c || word(c) != w {
		t.Errorf("%q: code %d, again %d, reads back %q", w, c, wordCode(w), word(c))
	}
	if n := unsafe.Sizeof(kept{}); n > 168 {
		t.Errorf("kept is %d bytes, want at most 168 (with the slot's lock and sequence number: three cache lines)", n)
	}
}

// Every field of an entry comes back out of the ring as it went in (its
// time in UTC): the ring keeps its words as codes and its time as
// nanoseconds, and loses nothing. Mutation check: dropping any field
// from kept.pack fails.
func TestRecentKeepsEveryField(t *testing.T) {
	t.Parallel()
	in := query.Entry{
		Time: time.Date(2026, 12, 2, 6, 0, 0, 123456789, time.FixedZone("x", 3600)), Client: netipPort("[fe80::1%eth0]:5353"),
		Proto: "tls", ClientName: "tablet", QName: "Www.Example.", QType: 28, QClass: 1, LoopCheck: true, Rebind: true,
		Rcode: 4095, Source: query.SourceForwardZone, Upstream: "192.168.1.1:53", Zone: "example.", ZoneOutcome: query.ZoneTimeout,
		Duration: 1500 * time.Microsecond, Queued: 20 * time.Microsecond, PoolErr: errTest, List: "ads", CacheResult: query.CacheStale,
	}
	r := newRecent(4)
	r.add(&in)
	var out query.Entry
	var attempts [recentAttempts]actors.Attempt
	if !r.copyOut(0, &out, &attempts) {
		t.Fatal("the query is not in the ring")
	}
	want := in
	want.Time = in.Time.UTC()
	want.Attempts = attempts[:0]
	if !reflect.DeepEqual(out, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", out, want)
	}
}
