package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// streamID is f's "DEVICE:INODE", as systemd writes $JOURNAL_STREAM.
func streamID(tb testing.TB, f *os.File) string {
	tb.Helper()
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// Only the stream $JOURNAL_STREAM names is journald's: a process that
// inherited the variable with its stderr elsewhere writes plain lines.
func TestSameStream(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	other, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	id := streamID(t, w)
	for _, tc := range []struct {
		f    *os.File
		env  string
		want bool
	}{
		{w, id, true},
		{other, id, false},
		{w, "", false},
		{w, "garbage", false},
		{w, strings.Replace(id, ":", ":9", 1), false},
	} {
		if got := sameStream(tc.f, tc.env); got != tc.want {
			t.Errorf("sameStream(%s, %q) = %v, want %v", tc.f.Name(), tc.env, got, tc.want)
		}
	}
	if toJournal(&bytes.Buffer{}) {
		t.Error("a buffer is journald's stream")
	}
}

// With journald's stream each line starts with its syslog priority and
// is the same JSON after it; without, lines are plain JSON.
func TestLogLinesCarryTheirPriority(t *testing.T) {
	for _, journal := range []bool{true, false} {
		var b bytes.Buffer
		log, _, err := newLogger("debug", &b, journal)
		if err != nil {
			t.Fatal(err)
		}
		log = log.With(zap.String("with", "field")) // a clone keeps the prefix
		log.Debug("d")
		log.Info("i")
		log.Warn("w")
		log.Error("e")
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		want := []string{"<7>", "<6>", "<4>", "<3>"}
		if len(lines) != len(want) {
			t.Fatalf("journal=%v: %d lines: %q", journal, len(lines), b.String())
		}
		for i, l := range lines {
			if journal {
				if !strings.HasPrefix(l, want[i]) {
					t.Errorf("line %d %q: want prefix %s", i, l, want[i])
				}
				l = strings.TrimPrefix(l, want[i])
			}
			var v struct{ Msg, With string }
			if err := json.Unmarshal([]byte(l), &v); err != nil || v.With != "field" {
				t.Errorf("journal=%v, line %d %q: not the JSON line (%v)", journal, i, l, err)
			}
		}
	}
}
