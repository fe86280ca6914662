package rdmap

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Many goroutines wait on one completion queue. A burst of completions
// that arrives while all of them sleep wakes every one: a waiter that
// takes one and leaves others wakes the next (one wake-up is signalled
// per push at most, and a burst comes faster than sleepers wake). Then
// waiters that leave on their context all the time, beside the others,
// make none lost either.
func TestCQWaiters(t *testing.T) {
	dev := NewDevice(DeviceConfig{})
	cq := dev.NewCompletionQueue(4096)
	const waiters, rounds = 8, 100
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sleeping := func() int {
		cq.mu.Lock()
		defer cq.mu.Unlock()
		return cq.sleepers
	}
	var mu sync.Mutex
	seen := make(map[uint64]bool)
	take := func() bool {
		c, err := cq.Wait(ctx)
		if err != nil {
			t.Errorf("a waiter got no completion: %v", err)
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[c.WRID] {
			t.Errorf("completion %d taken twice", c.WRID)
		}
		seen[c.WRID] = true
		return true
	}

	// In rounds: each waiter takes one completion per round, so a burst
	// is taken only if it wakes all of them.
	next := make([]chan struct{}, rounds)
	for i := range next {
		next[i] = make(chan struct{})
	}
	var taken sync.WaitGroup
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			for r := range rounds {
				ok := take()
				taken.Done()
				if !ok {
					return
				}
				if r+1 < rounds {
					select {
					case <-next[r]:
					case <-ctx.Done():
						return
					}
				}
			}
		})
	}
	for r := range uint64(rounds) {
		for sleeping() < waiters && ctx.Err() == nil {
			runtime.Gosched()
		}
		taken.Add(waiters)
		for i := range uint64(waiters) {
			cq.push(Completion{WRID: r*waiters + i}, false)
		}
		taken.Wait()
		if r+1 < rounds {
			close(next[r])
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Free running, with quitters.
	qctx, stopQuit := context.WithCancel(ctx)
	var qwg sync.WaitGroup
	for range 4 {
		qwg.Go(func() {
			for qctx.Err() == nil {
				c, cancel := context.WithTimeout(qctx, 50*time.Microsecond)
				if got, err := cq.Wait(c); err == nil {
					cq.push(got, false) // not ours to take: back it goes
					// and the others get their turn (js/wasm has one
					// thread and no preemption).
					runtime.Gosched()
				}
				cancel()
			}
		})
	}
	for range waiters {
		wg.Go(func() {
			for range rounds {
				if !take() {
					return
				}
			}
		})
	}
	base := uint64(waiters * rounds)
	for i := range uint64(waiters * rounds) {
		cq.push(Completion{WRID: base + i}, false)
		if i%8 == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	stopQuit()
	qwg.Wait()
	if len(seen) != 2*waiters*rounds {
		t.Errorf("%d completions taken of %d", len(seen), 2*waiters*rounds)
	}
}
