package blocking

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Every line format of spec section 11, in one file, decided through the
// Engine: what each rule matches, and what it does not.
func TestEveryLineFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeList(t, dir, "mixed.txt",
		"# hosts",
		"0.0.0.0 hosts.example",
		"127.0.0.1 a.hosts.example b.hosts.example # two names",
		":: v6.example",
		"plain.example",
		"||adblock.example^",
		"@@||ok.adblock.example^",
		"*.wild.example",
		`/^ad[0-9]+\./`,
		"! adblock comment",
		"||modifier.example^$third-party",
		"example.com##.banner",
		"not a rule at all",
		"bücher.example",
	)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"mixed\"\nsource = %q\n", path))})
	e := m.Engine()
	tests := []struct {
		name    string
		blocked bool
		rule    string
	}{
		{"hosts.example.", true, "hosts.example"},
		{"sub.hosts.example.", false, ""},
		{"a.hosts.example.", true, "a.hosts.example"},
		{"b.hosts.example.", true, "b.hosts.example"},
		{"v6.example.", true, "v6.example"},
		{"plain.example.", true, "plain.example"},
		{"www.plain.example.", false, ""},
		{"adblock.example.", true, "||adblock.example^"},
		{"deep.sub.adblock.example.", true, "||adblock.example^"},
		{"ok.adblock.example.", false, "@@||ok.adblock.example^"},
		{"x.ok.adblock.example.", false, "@@||ok.adblock.example^"},
		{"wild.example.", false, ""},
		{"a.wild.example.", true, "*.wild.example"},
		{"a.b.wild.example.", true, "*.wild.example"},
		{"ad42.tracker.example.", true, `/^ad[0-9]+\./`},
		{"ad.tracker.example.", false, ""},
		{"modifier.example.", false, ""},
		{"example.com.", false, ""},
		{"example.", false, ""},
	}
	for _, tt := range tests {
		d := decide(t, e, client1, tt.name)
		if d.Blocked != tt.blocked || d.Rule(wire(t, tt.name)) != tt.rule {
			t.Errorf("%s: blocked %v rule %q, want %v %q", tt.name, d.Blocked, d.Rule(wire(t, tt.name)), tt.blocked, tt.rule)
		}
		if d.Blocked && d.List != "mixed" {
			t.Errorf("%s: list %q, want mixed", tt.name, d.List)
		}
	}
	st := m.Lists()[0]
	// Rules: hosts.example, a., b., v6., plain., adblock., ok.adblock.,
	// *.wild, the regexp. Skipped: the modifier, the element rule, the
	// sentence, the U-label; comments are not counted.
	if st.Rules != 9 || st.Skipped != 4 || st.State != StateOK {
		t.Errorf("list status %+v: want 9 rules, 4 skipped, ok", st)
	}
}

// Names match case-insensitively, both ways; an internationalised name
// matches as its A-labels.
func TestCaseAndIDN(t *testing.T) {
	t.Parallel()
	path := writeList(t, t.TempDir(), "l.txt", "Ads.EXAMPLE", "||Track.Example^", "xn--bcher-kva.example", `/^UPPER\./`)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path))})
	for _, name := range []string{"ads.example.", "ADS.example.", "aDs.ExAmPlE.", "x.TRACK.example.", "XN--BCHER-KVA.example.", "xn--bcher-kva.EXAMPLE.", "upper.example.", "Upper.x."} {
		if d := decide(t, m.Engine(), client1, name); !d.Blocked {
			t.Errorf("%s is not blocked", name)
		}
	}
	if d := decide(t, m.Engine(), client1, "bücher.example."); d.Blocked {
		t.Errorf("a U-label query is blocked by its A-label's rule: %+v", d)
	}
}

// Allow wins over block: an Adblock exception over a hosts entry in the
// same list and across lists, an allow list over a block list, and a
// custom allow over everything.
func TestAllowOverBlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hosts := writeList(t, dir, "hosts.txt", "0.0.0.0 ads.example", "0.0.0.0 cdn.example", "0.0.0.0 custom.example", "0.0.0.0 both.example")
	adblock := writeList(t, dir, "adblock.txt", "@@||ads.example^")
	allow := writeList(t, dir, "allow.txt", "cdn.example")
	src := fmt.Sprintf(`[blocking]
block = ["||blocked-by-rule.example^", "0.0.0.0 both.example"]
allow = ["custom.example"]
[[blocking.lists]]
name = "hosts"
source = %q
[[blocking.lists]]
name = "exceptions"
source = %q
[[blocking.lists]]
name = "mine"
source = %q
kind = "allow"
`, hosts, adblock, allow)
	_ = src
	cfg := blockingConfig(t, strings.Replace(src, `"0.0.0.0 both.example"`, `"both.example"`, 1))
	m := startManager(t, Options{Config: cfg})
	e := m.Engine()
	tests := []struct {
		name          string
		blocked, allw bool
		list, rule    string
	}{
		{"ads.example.", false, true, "exceptions", "@@||ads.example^"},
		{"cdn.example.", false, true, "mine", "cdn.example"},
		{"custom.example.", false, true, "rule", "custom.example"},
		{"x.blocked-by-rule.example.", true, false, "rule", "||blocked-by-rule.example^"},
		{"both.example.", true, false, "rule", "both.example"}, // the custom rules come first
	}
	for _, tt := range tests {
		d := decide(t, e, client1, tt.name)
		if d.Blocked != tt.blocked || d.Allowed != tt.allw || d.List != tt.list || d.Rule(wire(t, tt.name)) != tt.rule {
			t.Errorf("%s: %+v rule %q; want blocked %v allowed %v list %q rule %q", tt.name, d, d.Rule(wire(t, tt.name)), tt.blocked, tt.allw, tt.list, tt.rule)
		}
	}
	// The exception alone, in a list with the hosts entry, wins too.
	one := writeList(t, dir, "one.txt", "0.0.0.0 ads.example", "@@||ads.example^")
	m2 := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"one\"\nsource = %q\n", one))})
	if d := decide(t, m2.Engine(), client1, "ads.example."); d.Blocked || !d.Allowed {
		t.Errorf("an exception in the hosts entry's own list: %+v, want allowed", d)
	}
}

// A group of clients at 127.0.0.2 is blocked while 127.0.0.1 is not; a
// client in two groups gets both groups' lists; the default group's lists
// apply to clients in no other group; client names place a client too.
func TestGroups(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kids := writeList(t, dir, "kids.txt", "games.example")
	ads := writeList(t, dir, "ads.txt", "ads.example")
	src := fmt.Sprintf(`[[blocking.lists]]
name = "kids"
source = %q
[[blocking.lists]]
name = "ads"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2", "tablet"]
lists = ["kids"]
[[blocking.groups]]
name = "lan"
clients = ["127.0.0.0/30"]
lists = ["ads"]
[[blocking.groups]]
name = "default"
lists = ["kids", "ads"]
`, kids, ads)
	m := startManager(t, Options{Config: blockingConfig(t, src)})
	e := m.Engine()
	if d := decide(t, e, client2, "games.example."); !d.Blocked || d.List != "kids" || strings.Join(d.GroupNames(), ",") != "kids,lan" {
		t.Errorf("127.0.0.2 games.example: %+v groups %v; want blocked by kids in kids,lan", d, d.GroupNames())
	}
	if d := decide(t, e, client1, "games.example."); d.Blocked || strings.Join(d.GroupNames(), ",") != "lan" {
		t.Errorf("127.0.0.1 games.example: %+v groups %v; want not blocked, in lan", d, d.GroupNames())
	}
	if d := decide(t, e, client1, "ads.example."); !d.Blocked {
		t.Errorf("127.0.0.1 ads.example: %+v; want blocked by ads (group lan)", d)
	}
	far := mustAddr("127.0.0.9")
	if d := decide(t, e, far, "games.example."); !d.Blocked || strings.Join(d.GroupNames(), ",") != "default" {
		t.Errorf("127.0.0.9 (no group): %+v groups %v; want blocked, in default", d, d.GroupNames())
	}
	if d := e.Decide(far, []string{"Tablet."}, wire(t, "games.example.")); !d.Blocked || strings.Join(d.GroupNames(), ",") != "kids" {
		t.Errorf("the client named tablet: %+v groups %v; want blocked, in kids", d, d.GroupNames())
	}
	if d := e.Decide(mustAddr("::ffff:127.0.0.2"), nil, wire(t, "games.example.")); !d.Blocked {
		t.Errorf("127.0.0.2 as an IPv4-mapped address is not in its group: %+v", d)
	}

	// Without a configured default group, the clients in no group get no
	// list; without any group, every list applies to every client.
	m2 := startManager(t, Options{Config: blockingConfig(t, strings.Split(src, "[[blocking.groups]]\nname = \"default\"")[0])})
	if d := decide(t, m2.Engine(), far, "games.example."); d.Blocked {
		t.Errorf("no default group configured: %+v, want nothing blocked", d)
	}
	m3 := startManager(t, Options{Config: blockingConfig(t, strings.Split(src, "[[blocking.groups]]")[0])})
	if d := decide(t, m3.Engine(), far, "ads.example."); !d.Blocked || strings.Join(d.GroupNames(), ",") != "default" {
		t.Errorf("no groups: %+v groups %v, want blocked, in default", d, d.GroupNames())
	}
}

// A list holds at most 1,000 regular expressions: the rest are skipped
// and counted; an expression that does not compile is skipped too.
func TestRegexpCap(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range MaxRegexps + 5 {
		lines = append(lines, fmt.Sprintf(`/^r%d\./`, i))
	}
	lines = append(lines, "/(/")
	path := writeList(t, t.TempDir(), "re.txt", lines...)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"re\"\nsource = %q\n", path))})
	if st := m.Lists()[0]; st.Rules != MaxRegexps || st.Skipped != 6 {
		t.Errorf("rules %d skipped %d, want %d and 6", st.Rules, st.Skipped, MaxRegexps)
	}
	if d := decide(t, m.Engine(), client1, "r999.example."); !d.Blocked {
		t.Error("the 1,000th expression is not in force")
	}
	if d := decide(t, m.Engine(), client1, "r1000.example."); d.Blocked {
		t.Error("the 1,001st expression is in force")
	}
}

// CNAME inspection blocks an answer whose chain names a blocked name,
// naming the list of the chain's match, unless an allow rule matches the
// name asked; cname_inspection = false turns it off.
func TestDecideChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeList(t, dir, "l.txt", "||tracker.example^", "@@||exempt.example^")
	src := fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path)
	m := startManager(t, Options{Config: blockingConfig(t, src)})
	e := m.Engine()
	chain := [][]byte{wire(t, "edge.cdn.example."), wire(t, "x.tracker.example.")}
	d := e.DecideChain(client1, nil, wire(t, "www.shop.example."), chain)
	if !d.Blocked || d.List != "l" || d.ChainIndex() != 1 || d.Rule(chain[d.ChainIndex()]) != "||tracker.example^" {
		t.Errorf("chain through a tracker: %+v index %d; want blocked by l at 1", d, d.ChainIndex())
	}
	if d := e.DecideChain(client1, nil, wire(t, "www.exempt.example."), chain); d.Blocked || !d.Allowed {
		t.Errorf("an allowed name's chain: %+v, want allowed", d)
	}
	if d := e.DecideChain(client1, nil, wire(t, "www.shop.example."), chain[:1]); d.Blocked {
		t.Errorf("a clean chain: %+v", d)
	}
	off := startManager(t, Options{Config: blockingConfig(t, "[blocking]\ncname_inspection = false\n"+src)})
	if d := off.Engine().DecideChain(client1, nil, wire(t, "www.shop.example."), chain); d.Blocked {
		t.Errorf("cname_inspection = false: %+v", d)
	}
}

// A malformed wire name is never blocked, and never read past its end.
func TestMalformedNames(t *testing.T) {
	t.Parallel()
	path := writeList(t, t.TempDir(), "l.txt", "||example^")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path))})
	for _, w := range [][]byte{nil, {}, {7, 'e', 'x'}, {0xc0, 12}, {64}, {7, 'e', 'x', 'a', 'm', 'p', 'l', 'e'}, append([]byte{3, 'a', 'b', 'c'}, 0xc0, 0)} {
		if d := m.Engine().Decide(client1, nil, w); d.Blocked {
			t.Errorf("%q blocked", w)
		}
	}
	if d := m.Engine().Decide(client1, nil, []byte{7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0}); !d.Blocked {
		t.Error("the well-formed name is not blocked")
	}
}

// Decide allocates nothing: not for a miss, not for a block, not for an
// allow, not with regular expressions, groups or a CNAME chain.
func TestDecideAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	dir := t.TempDir()
	path := writeList(t, dir, "l.txt", "0.0.0.0 ads.example", "||tracker.example^", "@@||ok.tracker.example^", `/^ad[0-9]+\./`)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf(`[[blocking.lists]]
name = "l"
source = %q
[[blocking.groups]]
name = "g"
clients = ["127.0.0.0/8", "tablet"]
lists = ["l"]
`, filepath.Clean(path)))})
	e := m.Engine()
	names := [][]byte{wire(t, "ads.example."), wire(t, "a.b.tracker.example."), wire(t, "ok.tracker.example."), wire(t, "ad7.x.example."), wire(t, "www.nothing.example.")}
	chain := [][]byte{wire(t, "a.cdn.example."), wire(t, "t.tracker.example.")}
	clientNames := []string{"laptop"}
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range names {
			e.Decide(client1, clientNames, n)
		}
		e.DecideChain(client1, clientNames, names[4], chain)
	})
	if allocs != 0 {
		t.Errorf("Decide allocates %v times per run", allocs)
	}
}

// Names of any length: a one-label rule (||zip^), a name of more labels
// than the query path hashes on its own stack (16), one of 100 labels
// matching an exact rule of 100, and a name longer than every rule.
func TestNamesOfAnyLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a.", 99) + "example"
	path := writeList(t, t.TempDir(), "l.txt", "||zip^", "||deep.example^", long)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path))})
	for name, blocked := range map[string]bool{
		"zip.":     true,
		"a.b.zip.": true,
		strings.Repeat("x.", 20) + "deep.example.": true,
		long + ".":        true,
		"b." + long + ".": false,
		strings.Repeat("x.", 20) + "shallow.example.": false,
	} {
		if d := decide(t, m.Engine(), client1, name); d.Blocked != blocked {
			t.Errorf("%.40s… (%d bytes): blocked %v, want %v", name, len(name), d.Blocked, blocked)
		}
	}
}

// A blocked decision carries the answer settings in force with its rules,
// and a reload changes both together.
func TestDecisionAnswer(t *testing.T) {
	t.Parallel()
	path := writeList(t, t.TempDir(), "l.txt", "ads.example")
	list := fmt.Sprintf("[[blocking.lists]]\nname = \"l\"\nsource = %q\n", path)
	m := startManager(t, Options{Config: blockingConfig(t, "[blocking]\nanswer = \"ip\"\nanswer_ip = [\"192.0.2.1\", \"2001:db8::1\"]\nanswer_ttl_s = 60\n"+list)})
	d := decide(t, m.Engine(), client1, "ads.example.")
	if a := d.Answer(); a.Mode != "ip" || a.IPv4 != mustAddr("192.0.2.1") || a.IPv6 != mustAddr("2001:db8::1") || a.TTL != 60 {
		t.Errorf("answer %+v", a)
	}
	m.Reload(blockingConfig(t, "[blocking]\nanswer = \"nxdomain\"\n"+list))
	if a := decide(t, m.Engine(), client1, "ads.example.").Answer(); a.Mode != "nxdomain" || a.TTL != 10 || a.IPv4.IsValid() {
		t.Errorf("after the reload: answer %+v, want nxdomain with the default TTL", a)
	}
}

// The snapshot's quick answer (namesNothing, the filters of every set
// read from the snapshot) never settles a name some rule matches, of any
// kind, in any list, the custom rules' included, and settles most of the
// others; with a regular expression in force it settles nothing. Mutation
// checks: testing only the name itself (not its parents) fails the ||x^
// and *.x names; leaving the custom rules out of the views fails
// custom.example's.
func TestSnapshotNamesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	block := writeList(t, dir, "block.txt", "0.0.0.0 hosts.example", "plain.example", "||adblock.example^", "*.wild.example")
	allow := writeList(t, dir, "allow.txt", "ok.hosts.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf(`
[blocking]
block = ["||custom.example^"]
[[blocking.lists]]
name = "block"
source = %q
[[blocking.lists]]
name = "allow"
kind = "allow"
source = %q
`, block, allow))})
	s := m.Engine().hot.Load()
	if s == nil || s.views == nil {
		t.Fatalf("no views in %+v", s)
	}
	nothing := func(name string) bool {
		var ls labels
		var hs [shortLabels]uint64
		if err := ls.split(wire(t, name), hs[:]); err != nil {
			t.Fatal(err)
		}
		return s.namesNothing(hs[:ls.n])
	}
	for _, name := range []string{"hosts.example.", "plain.example.", "adblock.example.", "a.b.adblock.example.",
		"x.wild.example.", "ok.hosts.example.", "custom.example.", "www.custom.example."} {
		if nothing(name) {
			t.Errorf("%s: settled as named by no rule", name)
		}
		if d := decide(t, m.Engine(), client1, name); !d.Blocked && !d.Allowed {
			t.Errorf("%s: %+v, want a rule's decision", name, d)
		}
	}
	// Names that share no suffix but the root: the hashes' seed is the
	// process's own, and a shared suffix that the filter happens to
	// pass (its false positive) would leave every name unsettled.
	settled := 0
	for i := range 1000 {
		if nothing(fmt.Sprintf("h%d.unrelated%d.test%d.", i, i, i)) {
			settled++
		}
	}
	if settled < 900 {
		t.Errorf("%d of 1000 names no rule names settled at once, want most", settled)
	}

	re := writeList(t, dir, "re.txt", "plain.example", `/^ad[0-9]+\./`)
	m2 := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"re\"\nsource = %q\n", re))})
	if s := m2.Engine().hot.Load(); s.views != nil {
		t.Errorf("views %v with a regular expression in force", s.views)
	}
	if d := decide(t, m2.Engine(), client1, "ad42.unrelated.example."); !d.Blocked {
		t.Errorf("the regexp did not block: %+v", d)
	}
}
