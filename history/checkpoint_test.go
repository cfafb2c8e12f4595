package history

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The writer never checkpoints; the checkpointer does, once the log has
// passed checkpointWAL, and the log then starts again from its beginning,
// cut to journal_size_limit: it stays bounded while rows flow.
// Mutation check: a checkpointer that never runs the PRAGMA leaves a log
// that only grows.
func TestCheckpointerBoundsTheLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := openSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ran := make(chan struct{})
	s.ck.ran.Store(&ran)
	w := &logWriter{t: t, s: s, path: path, now: time.Now()}
	batch, wal := w.batch, w.wal
	for wal() < 2*checkpointWAL {
		batch()
	}
	grown := wal()
	// Twice: the first may have begun while the batches were written (it
	// waited for the test to take its news), the second began after. The
	// bound is for a broken checkpointer, not a wait for timing: it looks
	// every checkpointEvery.
	for range 2 {
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Fatalf("no checkpoint with a log of %d bytes", grown)
		}
	}
	batch() // the log starts again, cut to its limit
	if got := wal(); got > checkpointWAL+grown/10 {
		t.Errorf("the log is %d bytes after a checkpoint (was %d), want about %d at most", got, grown, checkpointWAL)
	}
}

// When the checkpointer finds the log past restartWAL after its own try,
// the writer checkpoints after its next commit and the log starts again.
// Mutation check: afterCommit doing nothing leaves the log as it was.
func TestWriterRestartsAnOvergrownLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := openSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	w := &logWriter{t: t, s: s, path: path, now: time.Now()}
	batch, wal := w.batch, w.wal
	for range 10 {
		batch()
	}
	s.ck.restart.Store(true) // as the checkpointer does past restartWAL
	batch()                  // commits, then checkpoints
	before := wal()
	batch() // writes the log again from its beginning: the file does not grow
	if got := wal(); got > before {
		t.Errorf("the log grew from %d to %d bytes after the writer's checkpoint; want it started again", before, got)
	}
	if s.ck.restart.Load() {
		t.Error("the request was not taken")
	}
}

// logWriter writes batches of 2,000 rows into s and reads the size of
// its write-ahead log at path.
type logWriter struct {
	t    *testing.T
	s    *sqliteStore
	path string
	now  time.Time
	k    int
}

func (w *logWriter) batch() {
	rows := make([]Row, 2000)
	for i := range rows {
		w.k++
		rows[i] = Row{Time: w.now.Add(time.Duration(w.k) * time.Millisecond), QName: fmt.Sprintf("n%d.example.", w.k), QType: 1, Source: "pool"}
	}
	if err := w.s.write(rows); err != nil {
		w.t.Fatal(err)
	}
}

func (w *logWriter) wal() int64 {
	fi, err := os.Stat(w.path + "-wal")
	if err != nil {
		w.t.Fatal(err)
	}
	return fi.Size()
}
