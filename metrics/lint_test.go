package metrics

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// The exposition passes Prometheus's own linter (promlint, which
// promtool check metrics runs) wherever the names are nxdnsd's, and every
// family, the library's runtime and process families included, has a
// HELP text: nxdnsd's own, never the fallback. The
// library's names that promlint frowns on (go_cgo_calls_count is a
// counter without _total, process_io_read_bytes_total a gauge with it)
// are not nxdnsd's to rename; they are logged.
// Mutation check: deleting an nxdns_* entry of the help table, or naming a
// counter without _total, fails the test.
func TestExpositionLints(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"quad9", "isp"}, Zones: []string{"lan."}, Version: "1.2.3"})
	m.AttachPool(&fakePool{status: []actors.Status{{Name: "quad9", Slots: 32}, {Name: "isp", Slots: 4}}})
	m.AttachCache(fakeCache{})
	m.Query("udp", 0, 0)
	var b bytes.Buffer
	m.WritePrometheus(&b)
	problems, err := metricstest.Lint(b.Bytes())
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "nxdns_") || p.Text == "no help text" {
			t.Errorf("%s: %s", p.Metric, p.Text)
		} else {
			t.Logf("the library's %s: %s", p.Metric, p.Text)
		}
	}
	fs, err := metricstest.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := metricstest.CheckSpec(fs, []string{"quad9", "isp"}, []string{"lan."}); err != nil {
		t.Fatal(err) // every family of spec section 7 is there, so the loop below sees them all
	}
	for name, f := range fs {
		if !strings.HasPrefix(name, "nxdns_") {
			continue
		}
		if want, ok := helpText(name); f.Help == "" || f.Help == libraryHelp || ok && f.Help != want {
			t.Errorf("%s: HELP %q, want a text of its own", name, f.Help)
		}
	}
	if v, ok := fs.Value("nxdns_build_info", "version", "1.2.3", "goversion", runtime.Version()); !ok || v != 1 {
		t.Errorf("nxdns_build_info{version=1.2.3,goversion=%s} = %v, %v; want 1", runtime.Version(), v, ok)
	}
}
