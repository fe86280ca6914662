//go:build !js

package sctpddp

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// usage is a process's heap and goroutines at one moment.
type usage struct {
	heap       uint64 // HeapInuse after two GCs
	goroutines int
}

// measure takes the usage after two collections: the first moves what
// sync.Pools keep into their victim caches, the second frees it, so that
// buffers pooled for reuse do not count as held.
func measure() usage {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{ms.HeapInuse, runtime.NumGoroutine()}
}

func (u usage) String() string {
	return fmt.Sprintf("heap in use %.1f MiB, %d goroutines", float64(u.heap)/(1<<20), u.goroutines)
}

// settle waits until the goroutines are back to at most n (pion's loops
// end shortly after their associations close) and returns the usage then.
func settle(t *testing.T, n int) usage {
	t.Helper()
	waitfor.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= n })
	return measure()
}
