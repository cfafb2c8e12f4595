package daemon

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/actors"
)

// How each probe's end is logged (issue 24): a failure at warn, with its
// backoff; a local error at warn, with the host's error and no
// backoff_until while there is no backoff (it read 0001-01-01); an answer
// at info.
func TestProbeLogLines(t *testing.T) {
	core, logs := zapobserver.New(zap.DebugLevel)
	d := &Daemon{log: zap.New(core)}
	until := time.Date(2026, 12, 1, 14, 43, 1, 0, time.UTC)
	noRoute := errors.New("dial udp 9.9.9.9:53: connect: network is unreachable")
	refused := errors.New("upstream refused the query")

	d.probed("a", actors.OutcomePeerFault, actors.Status{InBackoff: true, BackoffUntil: until, LastError: refused})
	d.probed("a", actors.OutcomeLocalError, actors.Status{LastLocalError: noRoute})
	d.probed("a", actors.OutcomeLocalError, actors.Status{InBackoff: true, BackoffUntil: until, LastLocalError: noRoute})
	d.probed("a", actors.OutcomeAnswer, actors.Status{})

	type line struct {
		level zapcore.Level
		msg   string
		err   string
		until string
	}
	var got []line
	for _, e := range logs.All() {
		l := line{level: e.Level, msg: e.Message}
		m := e.ContextMap()
		if v, ok := m["error"]; ok {
			l.err = v.(string)
		}
		if v, ok := m["backoff_until"]; ok {
			l.until = v.(time.Time).Format(time.RFC3339)
		}
		got = append(got, l)
	}
	want := []line{
		{zapcore.WarnLevel, "upstream probe failed", refused.Error(), "2026-12-01T14:43:01Z"},
		{zapcore.WarnLevel, "upstream probe found no way out of this host; nothing recorded", noRoute.Error(), ""},
		{zapcore.WarnLevel, "upstream probe found no way out of this host; nothing recorded", noRoute.Error(), "2026-12-01T14:43:01Z"},
		{zapcore.InfoLevel, "upstream probe answered", "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
