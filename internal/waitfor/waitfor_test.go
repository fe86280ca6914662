package waitfor

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestUntilHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		time.AfterFunc(time.Second, func() { n.Store(1) })
		start := time.Now()
		if !Until(5*time.Second, func() bool { return n.Load() == 1 }) {
			t.Fatal("Until did not see the condition hold")
		}
		if d := time.Since(start); d < time.Second || d > time.Second+maxInterval {
			t.Fatalf("Until returned after %v, want within %v of 1s", d, maxInterval)
		}
	})
}

func TestUntilTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if Until(3*time.Second, func() bool { return false }) {
			t.Fatal("Until reported a condition that never holds")
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("Until gave up after %v, want 3s", d)
		}
	})
}

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := 0
		start := time.Now()
		if Every(time.Second, 300*time.Millisecond, func() bool { checks++; return false }) {
			t.Fatal("Every reported a condition that never holds")
		}
		// At once, at 300, 600 and 900 ms, and at the deadline.
		if d := time.Since(start); d != time.Second || checks != 5 {
			t.Fatalf("Every gave up after %v and %d checks, want 1s and 5", d, checks)
		}
	})
}
