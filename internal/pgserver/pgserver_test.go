package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// show is a setting of the server at url.
func show(t *testing.T, url, setting string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// running is whether pid is a process that has not ended: an ended
// postmaster is a zombie until PID 1 (it was reparented there when
// pg_ctl exited) reaps it.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// A durable server keeps fsync on, a test's has it off; PID names the
// live postmaster; a database created answers; Close stops the server
// and removes its directory.
func TestStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts  Options
		fsync string
	}{{Options{}, "off"}, {Options{Durable: true}, "on"}} {
		s, err := Start(tc.opts)
		if errors.Is(err, ErrNotInstalled) {
			t.Skip("prerequisite missing: initdb not installed")
		}
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		func() {
			defer s.Close()
			if got := show(t, s.URL(), "fsync"); got != tc.fsync {
				t.Errorf("%+v: fsync %s, want %s", tc.opts, got, tc.fsync)
			}
			url, err := s.CreateDB("bench1")
			if err != nil {
				t.Fatal(err)
			}
			if got := show(t, url, "server_encoding"); got != "UTF8" {
				t.Errorf("server_encoding %s", got)
			}
			if pid, err = s.PID(); err != nil {
				t.Fatal(err)
			}
			if !running(pid) {
				t.Errorf("PID %d runs no process", pid)
			}
			if _, err := s.CPU(); err != nil {
				t.Errorf("CPU: %v", err)
			}
		}()
		if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Close, %s: %v", s.dir, err)
		}
		if running(pid) {
			t.Errorf("after Close, the postmaster (PID %d) still runs", pid)
		}
	}
}
