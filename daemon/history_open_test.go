package daemon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/history"
	"github.com/nxdnsd/nxdnsd/query"
)

// slowOpen makes a historian whose opens wait for release.
func slowOpen(t *testing.T) (*historian, chan struct{}) {
	hs := newHistorian(zap.NewNop())
	release := make(chan struct{})
	hs.openHistory = func(cfg config.History, log *zap.Logger) (*history.History, error) {
		<-release
		return history.Open(cfg, log)
	}
	t.Cleanup(hs.close)
	return hs, release
}

func entryAt(i int) *query.Entry {
	return &query.Entry{Time: time.Now(), Client: netip.MustParseAddrPort("192.0.2.7:5300"), Proto: "udp",
		QName: "early.example.", QType: dns.TypeA, Source: query.SourcePool, Duration: time.Duration(i) * time.Microsecond}
}

// The rows of the queries answered while the history opens wait for it
// and are written once it is open: none is dropped. Fails before the
// commit that keeps them (every one was dropped and counted).
func TestHistoryKeepsTheRowsWhileItOpens(t *testing.T) {
	hs, release := slowOpen(t)
	cfg := config.Default().History
	cfg.Path = ""
	hs.apply(cfg)
	const n = 500
	for i := range n {
		hs.record(entryAt(i))
	}
	close(release)
	<-hs.opened()
	h := hs.current()
	if h == nil {
		t.Fatal("no history open")
	}
	h.Sync()
	if hs.Rows() != n || hs.Dropped() != 0 {
		t.Errorf("rows %d, dropped %d; want %d and 0", hs.Rows(), hs.Dropped(), n)
	}
}

// Past maxPending the rows that wait are dropped and counted, and an open
// that fails counts those that waited: every row is written or counted.
func TestHistoryCountsTheRowsItCannotKeep(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		hs, release := slowOpen(t)
		cfg := config.Default().History
		hs.apply(cfg)
		for i := range maxPending + 10 {
			hs.record(entryAt(i))
		}
		close(release)
		<-hs.opened()
		hs.current().Sync()
		if hs.Rows()+hs.Dropped() != maxPending+10 || hs.Dropped() < 10 {
			t.Errorf("rows %d, dropped %d; want %d in all, 10 dropped at least", hs.Rows(), hs.Dropped(), maxPending+10)
		}
	})
	t.Run("failed", func(t *testing.T) {
		hs, release := slowOpen(t)
		cfg := config.Default().History
		cfg.Path = t.TempDir() // a directory: cannot be opened as a database
		hs.apply(cfg)
		for i := range 20 {
			hs.record(entryAt(i))
		}
		close(release)
		<-hs.opened()
		if hs.current() != nil || hs.Dropped() != 20 || hs.Rows() != 0 {
			t.Errorf("open %v, rows %d, dropped %d; want none open, 0 and 20", hs.current() != nil, hs.Rows(), hs.Dropped())
		}
		hs.record(entryAt(0)) // history off now: no row, nothing counted
		if hs.Dropped() != 20 {
			t.Errorf("dropped %d after the open failed, want 20", hs.Dropped())
		}
	})
}
