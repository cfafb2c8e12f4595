package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/query"
)

// recentJSON reads up to limit queries of r as the JSON objects they are.
func recentJSON(tb testing.TB, r *recent, limit int) []map[string]any {
	tb.Helper()
	b := append(r.AppendJSON([]byte("["), limit), ']')
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("%v: %s", err, b)
	}
	return out
}

func poolEntry(i int, trail ...actors.Attempt) *query.Entry {
	return &query.Entry{
		Time: time.Date(2026, 11, 29, 18, 0, i, 0, time.UTC), Client: netip.MustParseAddrPort("192.0.2.7:5300"),
		Proto: "udp", QName: fmt.Sprintf("q%d.example.", i), QType: dns.TypeA, Rcode: dns.RcodeSuccess,
		Source: query.SourcePool, Upstream: "b", Duration: time.Duration(i) * time.Millisecond, Attempts: trail,
	}
}

// The ring keeps the last Cap queries, newest first, and limit cuts from
// the newest. Mutation check: reading oldest first, or keeping the first
// queries instead of overwriting, fails the order.
func TestRecentKeepsTheLastNewestFirst(t *testing.T) {
	t.Parallel()
	r := newRecent(3)
	for i := range 5 {
		r.add(poolEntry(i))
	}
	var names []any
	for _, q := range recentJSON(t, r, 10) {
		names = append(names, q["qname"])
	}
	if fmt.Sprint(names) != "[q4.example. q3.example. q2.example.]" {
		t.Errorf("kept %v, want q4, q3, q2", names)
	}
	if got := recentJSON(t, r, 1); len(got) != 1 || got[0]["qname"] != "q4.example." {
		t.Errorf("limit 1: %v", got)
	}
	if got := recentJSON(t, r, 0); len(got) != 0 {
		t.Errorf("limit 0: %v", got)
	}
}

// What the ring keeps is a copy: the query path reuses its entry and its
// trail for the next query the moment QueryDone returns.
func TestRecentCopiesTheTrail(t *testing.T) {
	t.Parallel()
	trail := []actors.Attempt{
		{Upstream: "a", Outcome: actors.OutcomePeerFault, Duration: 3 * time.Millisecond, Err: errors.New("connection refused")},
		{Upstream: "b", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond},
	}
	e := poolEntry(1, trail...)
	r := newRecent(4)
	r.add(e)
	e.QName, e.Attempts[0].Upstream, e.Attempts[1].Outcome = "reused.", "z", actors.OutcomeExpired // the next query
	q := recentJSON(t, r, 1)[0]
	got, _ := json.Marshal(q["attempts"])
	want := `[{"error":"connection refused","ms":3,"outcome":"peer_fault","upstream":"a"},{"ms":8,"outcome":"answer","upstream":"b"}]`
	if q["qname"] != "q1.example." || string(got) != want {
		t.Errorf("kept %v with trail %s, want q1.example. with %s", q["qname"], got, want)
	}
}

// A trail longer than a slot holds keeps its first attempts.
func TestRecentCutsALongTrail(t *testing.T) {
	t.Parallel()
	var trail []actors.Attempt
	for i := range recentAttempts + 3 {
		trail = append(trail, actors.Attempt{Upstream: fmt.Sprint("u", i), Outcome: actors.OutcomeExpired})
	}
	r := newRecent(1)
	r.add(poolEntry(0, trail...))
	a := recentJSON(t, r, 1)[0]["attempts"].([]any)
	if len(a) != recentAttempts || a[0].(map[string]any)["upstream"] != "u0" {
		t.Errorf("kept %d attempts starting %v, want the first %d", len(a), a[0], recentAttempts)
	}
}

// admin.recent_queries = 0: nothing kept, nothing to read, nothing paid.
func TestRecentOff(t *testing.T) {
	t.Parallel()
	r := newRecent(0)
	r.add(poolEntry(0))
	if r.Cap() != 0 || len(recentJSON(t, r, 10)) != 0 {
		t.Errorf("an off ring holds %d queries", r.Cap())
	}
}

// Adding allocates nothing, however full the ring.
func TestRecentAddAllocatesNothing(t *testing.T) {
	r := newRecent(16)
	e := poolEntry(0, actors.Attempt{Upstream: "a", Outcome: actors.OutcomeAnswer})
	if n := testing.AllocsPerRun(100, func() { r.add(e) }); n != 0 {
		t.Errorf("%v allocations per query, want 0", n)
	}
}

// Queries added while the ring is read: every object read is whole (the
// race detector watches the copies).
func TestRecentReadWhileAdding(t *testing.T) {
	t.Parallel()
	r := newRecent(64)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				r.add(poolEntry(w*10000+i, actors.Attempt{Upstream: "a", Outcome: actors.OutcomeAnswer}))
			}
		}()
	}
	for range 50 {
		for _, q := range recentJSON(t, r, 64) {
			if q["source"] != "pool" || len(q["attempts"].([]any)) != 1 {
				t.Fatalf("a torn query: %v", q)
			}
		}
	}
	wg.Wait()
	if got := recentJSON(t, r, 100); len(got) != 64 {
		t.Errorf("read %d queries of a full ring of 64", len(got))
	}
}
