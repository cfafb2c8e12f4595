package blocking

import (
	"slices"
	"testing"
)

// With no rule in force the Engine is idle (the query path's one atomic
// load); a custom rule wakes it, its removal makes it idle again, and the
// API still answers for an idle Engine: the groups, and a pause.
func TestIdleUntilARuleIsInForce(t *testing.T) {
	t.Parallel()
	m := startManager(t, Options{Config: blockingConfig(t, "")})
	e := m.Engine()
	if !e.Idle() || e.Inspects() {
		t.Fatalf("no rule: Idle %v Inspects %v, want true false", e.Idle(), e.Inspects())
	}
	r := APIRule{Kind: "block", Rule: "ads.example"}
	if _, err := m.AddRule(r); err != nil {
		t.Fatal(err)
	}
	if e.Idle() || !e.Inspects() {
		t.Fatalf("a custom rule: Idle %v Inspects %v, want false true", e.Idle(), e.Inspects())
	}
	if d := decide(t, e, client1, "ads.example."); !d.Blocked {
		t.Fatal("ads.example. not blocked")
	}
	if err := m.DeleteRule(r); err != nil {
		t.Fatal(err)
	}
	if !e.Idle() {
		t.Fatal("the rule deleted: not idle")
	}
	m.Pause(0)
	res, err := m.Check("ads.example", client1)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Paused || res.Blocked || !slices.Equal(res.Groups, []string{"default"}) {
		t.Errorf("check while idle and paused: %+v, want paused, not blocked, groups [default]", res)
	}
}

// cname_inspection off: a rule is in force but no answer is inspected.
func TestInspectsFollowsCNAMEInspection(t *testing.T) {
	t.Parallel()
	m := startManager(t, Options{Config: blockingConfig(t, "[blocking]\ncname_inspection = false\nblock = [\"ads.example\"]\n")})
	if e := m.Engine(); e.Idle() || e.Inspects() {
		t.Errorf("Idle %v Inspects %v, want false false", e.Idle(), e.Inspects())
	}
}
