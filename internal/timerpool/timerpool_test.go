package timerpool

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A reused timer fires after its new duration, and a tick it never
// delivered before Put is not seen after Get.
func TestReusedTimerFiresOnceAtItsNewTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pool
		first := p.Get(time.Second)
		time.Sleep(2 * time.Second) // it fired; nobody read the tick
		p.Put(first)

		start := time.Now()
		again := p.Get(5 * time.Second)
		defer p.Put(again)
		if again != first {
			t.Log("the pool made a new timer; the test still holds")
		}
		<-again.C
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("fired after %v, want 5s: a stale tick was delivered", got)
		}
	})
}

func TestGetWithoutPutMakesATimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pool
		start := time.Now()
		tm := p.Get(time.Minute)
		<-tm.C
		if got := time.Since(start); got != time.Minute {
			t.Errorf("fired after %v, want 1m", got)
		}
		p.Put(tm)
	})
}
