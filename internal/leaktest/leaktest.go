// Package leaktest checks that a test leaves no goroutines behind.
package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// grace is how long the goroutines a test started may take to finish
// once it has ended (a variable for its own test).
var grace = 3 * time.Second

// Check counts the goroutines running now and, when t ends (after the
// cleanups registered later, which run first), fails t with every
// goroutine's stack if more are still running after a grace of 3 s. Call it first
// in the test.
func Check(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(grace)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
