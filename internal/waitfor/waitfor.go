// Package waitfor polls a condition, for the tests that have no event to
// wait on: a state read through an accessor, a counter, a file that grows.
package waitfor

import (
	"testing"
	"time"
)

// maxInterval bounds the pause between two checks: the first checks come
// quickly, later ones back off so that a costly condition does not take
// the CPU from the code it waits for.
const maxInterval = 20 * time.Millisecond

// Until reports whether cond holds within timeout. It checks cond at once,
// then at growing intervals, and once more at the deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	interval := time.Millisecond / 4
	pause := time.NewTimer(interval)
	defer pause.Stop()
	for {
		select {
		case <-deadline.C:
			return cond()
		case <-pause.C:
			if cond() {
				return true
			}
			if interval *= 2; interval > maxInterval {
				interval = maxInterval
			}
			pause.Reset(interval)
		}
	}
}

// Every reports whether cond holds within timeout, checking it at once,
// then every interval, and once more at the deadline: for a condition
// whose check costs something of its own, such as a connection.
func Every(timeout, interval time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// True fails t at once, with the message format and args make, if cond
// does not hold within timeout.
func True(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf(format, args...)
	}
}
