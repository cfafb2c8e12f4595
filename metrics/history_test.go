package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

type fakeHistory struct{}

func (fakeHistory) Rows() uint64    { return 12 }
func (fakeHistory) Dropped() uint64 { return 3 }
func (fakeHistory) Bytes() int64    { return 1 << 20 }

// The history's series exist from start-up at zero, with a HELP text and
// TYPE of their own, and read the history once attached; detaching it
// reads zero again.
func TestHistorySeries(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}})
	want := map[string]float64{"nxdns_history_rows_total": 0, "nxdns_history_dropped_total": 0, "nxdns_history_bytes": 0}
	check := func() {
		t.Helper()
		var b bytes.Buffer
		m.WritePrometheus(&b)
		problems, err := metricstest.Lint(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "nxdns_history") {
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		}
		fs, err := metricstest.Parse(&b)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			f := fs[name]
			if f == nil || f.Help == "" || f.Help == libraryHelp {
				t.Fatalf("%s: missing or without its HELP text: %+v", name, f)
			}
			if kind := map[bool]string{true: "counter", false: "gauge"}[strings.HasSuffix(name, "_total")]; f.Type != kind {
				t.Errorf("%s: type %s, want %s", name, f.Type, kind)
			}
			if got := value(t, fs, name); got != v {
				t.Errorf("%s = %v, want %v", name, got, v)
			}
		}
	}
	check()
	m.AttachHistory(fakeHistory{})
	want = map[string]float64{"nxdns_history_rows_total": 12, "nxdns_history_dropped_total": 3, "nxdns_history_bytes": 1 << 20}
	check()
	m.AttachHistory(nil)
	want = map[string]float64{"nxdns_history_rows_total": 0, "nxdns_history_dropped_total": 0, "nxdns_history_bytes": 0}
	check()
}
