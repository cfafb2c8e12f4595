package history

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// The rollups answer what the rows say while rows arrive hour after hour
// (late ones among them, and small chunks on both sides of an hour's
// end) and while retention deletes an hour and a part of the next, both
// rolled up by then: every top list and the timeline over ranges that
// start and end on hours and inside them, against counts of the rows the
// store holds and against the answers counted from the rows alone.
// Mutation checks: without the drop of hours before the oldest row in
// sync, the hours retention deleted stay in memory; counting the new
// sealed chunks into open from the last one counted (no i++ in sync)
// counts it twice.
func TestRollupsFollowRowsAndRetention(t *testing.T) {
	t.Parallel()
	s, err := openSQLite("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.rowsPerChunk, s.chunk = 40, 60
	ctx := context.Background()
	base := time.Now().Add(-20 * 24 * time.Hour).Truncate(time.Hour)
	at := base
	i := 0
	// write writes a batch of 10 rows, 41 s apart, the last one 3 min late
	// (before rows of the batch before, unless they were sealed).
	write := func() {
		var rows []Row
		for j := range 10 {
			tm := at
			if j == 9 {
				tm = at.Add(-3 * time.Minute)
			}
			rows = append(rows, rollupRow(i, tm))
			at = at.Add(41 * time.Second)
			i++
		}
		if err := s.write(rows); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		end := at
		p, err := s.rows(ctx, filter{Rcode: -1, Limit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range [][2]time.Time{
			{base, end},
			{base.Add(17*time.Minute + time.Second), end.Add(time.Microsecond)},
			{base.Add(time.Hour), base.Add(3 * time.Hour)},
			{base.Add(61 * time.Minute), end.Add(-5 * time.Minute)},
			{end.Add(-2*time.Hour - 5*time.Minute), end.Add(time.Minute)},
		} {
			checkSpan(t, s, p.Rows, when, span[0], span[1])
		}
	}
	for n := range 25 { // 2 h 51 min of rows
		write()
		if n%3 == 2 {
			check("writing")
		}
	}
	// Retention: the first hour and 20 min of the second go, both rolled
	// up by now.
	cutoff := base.Add(80 * time.Minute)
	for more := true; more; {
		if more, err = s.maintain(cutoff, 1<<40); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.roll.hours) == 0 {
		t.Fatal("no hour rolled up before retention: the case is not made")
	}
	check("after retention")
	for h := range s.roll.hours {
		if h*usPerHour < oldestKey(t, s) {
			t.Errorf("hour %v still rolled up after retention deleted its rows", s.time(h*usPerHour))
		}
	}
	for n := range 10 {
		write()
		if n%3 == 0 {
			check("writing after retention")
		}
	}
	// Reads while the writer writes: for the race detector.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	until := at.Add(2 * time.Hour)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := s.top(ctx, TopDomains, "", base, until, 10); err != nil {
					errs <- err
					return
				}
				if _, err := s.timeline(ctx, "", base, until, 10*time.Minute); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 10 {
		write()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check("after reads while writing")
}

// rollupRow is the i-th row of TestRollupsFollowRowsAndRetention: 30
// names, one in 7 asked once, 5 clients, 2 upstreams, one row in 5
// blocked.
func rollupRow(i int, tm time.Time) Row {
	r := Row{Time: tm, Proto: "udp", QType: 1, Source: "cache", Duration: time.Millisecond}
	r.QName = fmt.Sprintf("n%d.example.", i*7%30)
	if i%7 == 3 {
		r.QName = fmt.Sprintf("once%d.example.", i)
	}
	r.Client = netip.AddrFrom4([4]byte{10, 0, 0, byte(i % 5)})
	switch i % 5 {
	case 0:
		r.Source, r.List = "blocked", "ads"
	case 1, 2:
		r.Source, r.Upstream = "pool", []string{"quad9", "cloudflare"}[i%2]
	}
	if i%11 == 0 {
		r.Rcode = 2
	}
	return r
}

// checkSpan compares the store's answers over [from, to) with counts of
// the rows it holds, all.
func checkSpan(t *testing.T, s *sqliteStore, all []entry, when string, from, to time.Time) {
	t.Helper()
	if !from.Before(to) {
		return // the API refuses it
	}
	ctx := context.Background()
	var rows []entry
	for _, e := range all {
		if !e.Time.Before(from) && e.Time.Before(to) {
			rows = append(rows, e)
		}
	}
	for _, what := range []string{TopDomains, TopBlocked, TopClients, TopUpstreams} {
		byKey := map[string]int64{}
		for _, e := range rows {
			switch what {
			case TopDomains:
				byKey[e.QName]++
			case TopBlocked:
				if e.Source == "blocked" {
					byKey[e.QName]++
				}
			case TopClients:
				byKey[e.Client]++
			case TopUpstreams:
				if e.Upstream != "" {
					byKey[e.Upstream]++
				}
			}
		}
		want := ranked(byKey, 1000)
		got, err := s.top(ctx, what, "", from, to, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: top %s over %v..%v:\n got %v\nwant %v", when, what, from.Sub(from.Truncate(time.Hour)), to.Sub(from), got, want)
		}
		lo, hi := max(s.key(from), oldestKey(t, s)), s.key(to)
		if lo < hi {
			rowsOnly, err := s.topRows(ctx, what, lo, hi, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rowsOnly, want) {
				t.Errorf("%s: top %s from the rows alone: %v, want %v", when, what, rowsOnly, want)
			}
		}
	}
	const step = 10 * time.Minute
	got, err := s.timeline(ctx, "", from, to, step)
	if err != nil {
		t.Fatal(err)
	}
	want := map[time.Time][numOutcomes]int64{}
	for _, e := range rows {
		b := want[e.Time.Truncate(step)]
		b[outcome(sourceCode(e.Source), e.Rcode)]++
		want[e.Time.Truncate(step)] = b
	}
	for _, b := range got {
		if b.N != want[b.Time] {
			t.Errorf("%s: timeline over %v..%v at %v: %v, want %v", when, from, to, b.Time, b.N, want[b.Time])
		}
		delete(want, b.Time)
	}
	if len(want) != 0 {
		t.Errorf("%s: timeline without the buckets of %d rows", when, len(want))
	}
}

func oldestKey(t *testing.T, s *sqliteStore) int64 {
	t.Helper()
	k, err := s.oldest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
