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

func shortGrace(t *testing.T) {
	saved := grace
	grace = time.Second
	t.Cleanup(func() { grace = saved })
}

// A goroutine that ends within the grace passes; one still running
// after it fails the test.
func TestCheck(t *testing.T) {
	shortGrace(t)
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

// A goroutine started before Check that ends during the test does not
// hide one the test leaves running.
func TestCheckEarlierGoroutineEnds(t *testing.T) {
	shortGrace(t)
	earlier := make(chan struct{})
	go func() { <-earlier }()
	stop := make(chan struct{})
	defer close(stop)
	r := &recorder{TB: t}
	Check(r)
	go func() { <-stop }()
	close(earlier)
	r.end()
	if !r.failed {
		t.Fatal("a leak went unseen when an earlier goroutine ended")
	}
}

// A goroutine whose stack holds an ignored function is not a leak.
func TestCheckIgnore(t *testing.T) {
	shortGrace(t)
	stop := make(chan struct{})
	defer close(stop)
	r := &recorder{TB: t}
	Check(r, "leaktest.outlives")
	go outlives(stop)
	r.end()
	if r.failed {
		t.Fatal("an ignored goroutine failed the test")
	}
}

func outlives(stop chan struct{}) { <-stop }
