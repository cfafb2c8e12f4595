package cache

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestGetStates follows an answer and a failure through their lives with
// an injected clock.
func TestGetStates(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.StaleMaxAge = time.Hour
	c := New(cfg)
	k := keyOf(example) // lives 120 s

	steps := []struct {
		at   time.Duration
		want State
	}{
		{-time.Second, Fresh}, // a clock stepped back: still fresh, age 0
		{0, Fresh},
		{119 * time.Second, Fresh},
		{120 * time.Second, Stale},
		{120*time.Second + time.Hour - 1, Stale},
		{120*time.Second + time.Hour, Miss},
	}
	if _, st := c.Get(k, t0); st != Miss {
		t.Fatalf("empty cache: %v", st)
	}
	c.Put(k, example.pack(t), t0)
	for _, s := range steps {
		if _, st := c.Get(k, t0.Add(s.at)); st != s.want {
			t.Errorf("answer at %v: %v, want %v", s.at, st, s.want)
		}
	}

	fk := Key{Name: "fail.example.", Type: dns.TypeA, Class: dns.ClassINET}
	c.PutFailure(fk, t0)
	for _, s := range []struct {
		at   time.Duration
		want State
	}{{0, Failure}, {5*time.Second - 1, Failure}, {5 * time.Second, Miss}} {
		h, st := c.Get(fk, t0.Add(s.at))
		if st != s.want {
			t.Errorf("failure at %v: %v, want %v", s.at, st, s.want)
		}
		if st == Failure && (h.Rcode() != dns.RcodeServerFailure || h.Len() != 0 ||
			len(h.AppendAnswer(nil, 1, nil, t0, 0)) != 0 || h.PrefetchDue(t0)) {
			t.Errorf("a failure hit: rcode %d, len %d", h.Rcode(), h.Len())
		}
	}
}

// TestNoStale: with StaleMaxAge 0 an answer is gone at expiry; with
// FailureTTL 0 no failure is remembered.
func TestNoStale(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.StaleMaxAge, cfg.FailureTTL = 0, 0
	c := New(cfg)
	k := keyOf(example)
	c.Put(k, example.pack(t), t0)
	if _, st := c.Get(k, t0.Add(120*time.Second)); st != Miss {
		t.Fatalf("at expiry without serve-stale: %v", st)
	}
	fk := Key{Name: "fail.example.", Type: dns.TypeA, Class: dns.ClassINET}
	c.PutFailure(fk, t0)
	if _, st := c.Get(fk, t0); st != Miss || c.Entries() != 1 {
		t.Fatalf("a failure remembered with FailureTTL 0: %v, %d entries", st, c.Entries())
	}
}

// TestKeyedApart: DO, CD, type and class make different entries; the
// name's case does not, because the key is lower case.
func TestKeyedApart(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	base := keyOf(example)
	c.Put(base, example.pack(t), t0)
	for _, k := range []Key{
		{Name: base.Name, Type: base.Type, Class: base.Class, DO: true},
		{Name: base.Name, Type: base.Type, Class: base.Class, CD: true},
		{Name: base.Name, Type: base.Type, Class: base.Class, DO: true, CD: true},
		{Name: base.Name, Type: dns.TypeAAAA, Class: base.Class},
	} {
		if _, st := c.Get(k, t0); st != Miss {
			t.Errorf("%+v found the entry of %+v", k, base)
		}
	}
	do := base
	do.DO = true
	c.Put(do, example.pack(t), t0.Add(time.Second))
	h1, _ := c.Get(base, t0.Add(2*time.Second))
	h2, _ := c.Get(do, t0.Add(2*time.Second))
	if h1.Remaining(t0.Add(2*time.Second)) == h2.Remaining(t0.Add(2*time.Second)) || c.Entries() != 2 {
		t.Fatalf("DO and no-DO share an entry")
	}
}

// TestClaimRefresh: one claim per entry; Release lets the next hit claim;
// a new entry from Put is unclaimed; a Hit of a replaced entry cannot
// claim the new one.
func TestClaimRefresh(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	if (Hit{}).ClaimRefresh() {
		t.Fatal("a Miss's Hit claimed")
	}
	c.Put(k, example.pack(t), t0)
	now := t0.Add(110 * time.Second) // 10 s of 120 left: due
	h1, _ := c.Get(k, now)
	h2, _ := c.Get(k, now)
	if !h1.PrefetchDue(now) {
		t.Fatal("not due in the last 10 %")
	}
	if !h1.ClaimRefresh() {
		t.Fatal("the first claim failed")
	}
	if h2.ClaimRefresh() || h1.ClaimRefresh() {
		t.Fatal("a second claim succeeded")
	}
	h1.Release()
	h3, _ := c.Get(k, now)
	if !h3.ClaimRefresh() {
		t.Fatal("no claim after Release")
	}
	c.Put(k, example.pack(t), now)
	h4, _ := c.Get(k, now)
	if h3.ClaimRefresh() || !h4.ClaimRefresh() {
		t.Fatal("a new entry is not claimable once, or an old Hit claimed it")
	}
	h3.Release() // of a replaced entry: changes nothing
	if h4.ClaimRefresh() {
		t.Fatal("an old Hit's Release ended the new entry's claim")
	}
}

// TestPrefetchDue: the last 10 % of a lifetime of at least 10 s.
func TestPrefetchDue(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	short := msg{name: "s.example.", qtype: dns.TypeA, an: []string{"s.example. 9 IN A 192.0.2.1"}}
	c.Put(keyOf(example), example.pack(t), t0)
	c.Put(keyOf(short), short.pack(t), t0)
	for _, tt := range []struct {
		k    Key
		at   time.Duration
		want bool
	}{
		{keyOf(example), 0, false},
		{keyOf(example), 108*time.Second - 1, false},
		{keyOf(example), 108 * time.Second, true},
		{keyOf(example), 120*time.Second - 1, true},
		{keyOf(example), 120 * time.Second, false}, // stale
		{keyOf(short), 8500 * time.Millisecond, false},
	} {
		h, _ := c.Get(tt.k, t0.Add(tt.at))
		if got := h.PrefetchDue(t0.Add(tt.at)); got != tt.want {
			t.Errorf("%s at %v: due %v, want %v", tt.k.Name, tt.at, got, tt.want)
		}
	}
}

// TestHitOutlivesEntry: a Hit keeps its answer after eviction and
// replacement.
func TestHitOutlivesEntry(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	c.Put(k, example.pack(t), t0)
	h, _ := c.Get(k, t0)
	before := string(h.AppendAnswer(nil, 1, nil, t0, 0))
	other := example
	other.an = []string{"www.example.com. 300 IN A 192.0.2.99"}
	c.Put(k, other.pack(t), t0)
	if after := string(h.AppendAnswer(nil, 1, nil, t0, 0)); after != before {
		t.Fatal("a Hit changed when its entry was replaced")
	}
}

// DropStale removes an entry only while it is stale: a fresh answer, a
// remembered failure and another key's entry stay, and the bytes it
// weighed are given back.
func TestDropStale(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.StaleMaxAge = time.Hour
	c := New(cfg)
	k := keyOf(example) // lives 120 s
	c.Put(k, example.pack(t), t0)
	if c.DropStale(k, t0.Add(119*time.Second)) {
		t.Fatal("a fresh entry was dropped")
	}
	other := k
	other.DO = true
	if c.DropStale(other, t0.Add(121*time.Second)) {
		t.Fatal("another key's entry was dropped")
	}
	if !c.DropStale(k, t0.Add(121*time.Second)) {
		t.Fatal("a stale entry was not dropped")
	}
	if _, st := c.Get(k, t0.Add(121*time.Second)); st != Miss || c.Entries() != 0 || c.Bytes() != 0 {
		t.Errorf("after the drop: %v, %d entries, %d bytes; want a miss, none, 0", st, c.Entries(), c.Bytes())
	}

	fk := Key{Name: "fail.example.", Type: dns.TypeA, Class: dns.ClassINET}
	c.PutFailure(fk, t0)
	if c.DropStale(fk, t0) || c.DropStale(fk, t0.Add(time.Minute)) || c.Entries() != 1 {
		t.Errorf("a remembered failure was dropped: %d entries", c.Entries())
	}
}
