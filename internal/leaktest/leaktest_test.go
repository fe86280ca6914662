package leaktest

import (
	"testing"
	"time"
)

// recorder is a testing.TB that keeps its cleanups and whether it
// failed, so that Check's verdict can be looked at.
type recorder struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (r *recorder) Helper()               { r.TB.Helper() }
func (r *recorder) Cleanup(f func())      { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A goroutine that ends within the grace passes; one still running
// after it fails the test.
func TestCheck(t *testing.T) {
	saved := grace
	grace = 200 * time.Millisecond
	defer func() { grace = saved }()
	r := &recorder{TB: t}
	Check(r)
	ends := time.After(50 * time.Millisecond)
	go func() { <-ends }()
	r.end()
	if r.failed {
		t.Fatal("a goroutine that ended within the grace failed the test")
	}
	stop := make(chan struct{})
	defer close(stop)
	r = &recorder{TB: t}
	Check(r)
	go func() { <-stop }()
	r.end()
	if !r.failed {
		t.Fatal("a goroutine left running did not fail the test")
	}
}
