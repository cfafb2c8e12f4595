package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nxdnsd/nxdnsd/wire"
)

var _ wire.LazyContext = (*attemptCtx)(nil)

// isDone reports whether ch is closed, without blocking.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAttemptCtxWithoutDoneReadsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := newAttemptCtx(context.Background(), time.Now().Add(time.Second))
		defer ctx.stop()
		if d, ok := ctx.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline() = %v, %v; want the expiry", d, ok)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("Err() = %v before the expiry", err)
		}
		time.Sleep(time.Second)
		if err := ctx.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err() = %v at the expiry, want DeadlineExceeded", err)
		}
		if !isDone(ctx.Done()) {
			t.Errorf("Done() after the expiry is not closed")
		}
	})
}

func TestAttemptCtxDoneClosesAtTheExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx := newAttemptCtx(context.Background(), start.Add(2500*time.Millisecond))
		defer ctx.stop()
		<-ctx.Done()
		if got := time.Since(start); got != 2500*time.Millisecond {
			t.Errorf("Done closed after %v, want exactly 2.5s", got)
		}
		if err := ctx.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err() = %v, want DeadlineExceeded", err)
		}
	})
}

func TestAttemptCtxFollowsItsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx := newAttemptCtx(parent, time.Now().Add(time.Hour))
		defer ctx.stop()
		done := ctx.Done()
		cancel()
		synctest.Wait()
		if !isDone(done) || !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("after the parent's cancel: done %v, Err() = %v; want closed, Canceled", isDone(done), ctx.Err())
		}

		// Without Done, Err still sees the parent.
		parent2, cancel2 := context.WithCancel(context.Background())
		lazy := newAttemptCtx(parent2, time.Now().Add(time.Hour))
		defer lazy.stop()
		cancel2()
		if err := lazy.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("lazy Err() = %v after the parent's cancel, want Canceled", err)
		}
	})
}

func TestAttemptCtxTakesAnEarlierParentDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx := newAttemptCtx(parent, time.Now().Add(time.Hour))
		defer ctx.stop()
		if d, _ := ctx.Deadline(); !d.Equal(time.Now().Add(time.Second)) {
			t.Errorf("Deadline() = %v, want the parent's, an hour earlier than the expiry", d)
		}
	})
}

func TestAttemptCtxStopCancelsAndDisarms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx := newAttemptCtx(parent, time.Now().Add(time.Hour))
		done := ctx.Done() // arms the timer and the parent watch
		ctx.stop()
		if !isDone(done) || ctx.Err() != context.Canceled {
			t.Errorf("after stop: done %v, Err() = %v; want closed, Canceled", isDone(done), ctx.Err())
		}
		cancel() // the parent watch is gone: nothing changes, nothing runs
		synctest.Wait()
		if ctx.Err() != context.Canceled {
			t.Errorf("Err() = %v after the parent's later cancel, want Canceled still", ctx.Err())
		}

		// Stopped before Done was ever called: Done is closed at once.
		never := newAttemptCtx(context.Background(), time.Now().Add(time.Hour))
		never.stop()
		if !isDone(never.Done()) || never.Err() != context.Canceled {
			t.Errorf("Done after stop: closed %v, Err() = %v; want closed, Canceled", isDone(never.Done()), never.Err())
		}
	})
}

func TestAttemptCtxWithoutDoneAllocatesOnce(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	expiry := time.Now().Add(time.Hour)
	allocs := testing.AllocsPerRun(100, func() {
		ctx := newAttemptCtx(parent, expiry)
		_ = ctx.Err()
		ctx.stop()
	})
	if allocs > 1 {
		t.Errorf("an attempt context that nobody asks Done of costs %v allocations, want 1", allocs)
	}
}
