package history

import (
	"context"
	"database/sql"
	"os"
	"sync/atomic"
	"time"
)

// The checkpointer copies the write-ahead log into the database file, on
// a connection and a goroutine of its own: a checkpoint syncs the file to
// disk, and on a busy disk (an SD card, a machine writing elsewhere) that
// takes from milliseconds to seconds. The writer, which never
// checkpoints, keeps taking rows meanwhile: WAL lets a checkpoint run
// beside a writer and readers (PASSIVE: it copies what no reader still
// needs and waits for nobody).
const (
	checkpointEvery = time.Second // how often the log's size is looked at
	checkpointWAL   = 4 << 20     // a log this big is checkpointed (SQLite's own default: 1,000 pages)
	checkpointIdle  = 30 * time.Second

	// A passive checkpoint that a commit overtakes leaves the newest
	// frames for the next one, and the log starts again from its
	// beginning only once one has copied every frame. Under a steady
	// flow of commits on a slow disk that may never happen: past this
	// size the writer itself checkpoints (RESTART) after its next commit,
	// its rows waiting in the queue meanwhile.
	restartWAL = 4 * checkpointWAL
)

type checkpointer struct {
	db      *sql.DB
	path    string
	restart atomic.Bool // the writer is to checkpoint after its next commit
	quit    chan struct{}
	done    chan struct{}
	ran     atomic.Pointer[chan struct{}] // tests: told after each checkpoint
}

func (s *sqliteStore) startCheckpointer(dsn string) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return err
	}
	c := &checkpointer{db: db, path: s.path + "-wal", quit: make(chan struct{}), done: make(chan struct{})}
	s.ck = c
	go c.run()
	return nil
}

// run checkpoints when the log has grown past checkpointWAL, or holds
// anything and checkpointIdle has passed since the last checkpoint.
func (c *checkpointer) run() {
	defer close(c.done)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-c.quit:
			return
		case now := <-tick.C:
			fi, err := os.Stat(c.path)
			if err != nil || fi.Size() == 0 {
				continue
			}
			if fi.Size() < checkpointWAL && now.Sub(last) < checkpointIdle {
				continue
			}
			// An error (a reader in the way, a full disk) is tried
			// again on the next tick; the writer's rows are in the log.
			_, _ = c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
			last = now
			if fi.Size() >= restartWAL {
				c.restart.Store(true)
			}
			if ran := c.ran.Load(); ran != nil {
				select {
				case *ran <- struct{}{}:
				case <-c.quit:
					return
				}
			}
		}
	}
}

// stop ends the checkpointer; the store's close checkpoints last.
func (c *checkpointer) stop() error {
	close(c.quit)
	<-c.done
	return c.db.Close()
}

// afterCommit is the writer's share: the RESTART checkpoint the
// checkpointer asked for, on the writer's connection between two
// batches, so that no write waits for it and fails busy.
func (s *sqliteStore) afterCommit() {
	if s.ck == nil || !s.ck.restart.Swap(false) {
		return
	}
	_, _ = s.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(RESTART)`)
}
