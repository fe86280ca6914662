// Package leaktest checks that a test leaves no goroutines behind.
//
//	func TestConn(t *testing.T) {
//		leaktest.Check(t)
//		... // every goroutine the test starts must end with it
//	}
package leaktest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// grace is how long the goroutines a test started may take to finish
// once it has ended (a variable for its own test).
var grace = 5 * time.Second

// Check notes the goroutines running now and, when t ends (after the
// cleanups registered later, which run first), fails t with the stack of
// every goroutine started since that still runs after a grace of 5 s,
// leaving out those whose stack contains one of ignore (a function that
// is known to outlive its owner for a bounded time). Call it first in the
// test.
//
// A goroutine is told apart by its number, which the runtime never
// reuses (nor hands out in order: each P takes numbers in batches), so a
// goroutine of an earlier test that ends during this one cannot hide one
// this test leaks, as a count of goroutines would.
func Check(t testing.TB, ignore ...string) {
	t.Helper()
	before := running()
	t.Cleanup(func() {
		var left []string
		gone := func() bool {
			left = started(before, ignore)
			return len(left) == 0
		}
		if !waitfor.Until(grace, gone) {
			t.Errorf("%d goroutines the test started are still running:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}

// id is the goroutine number of a stack record, 0 if it has none.
func id(record string) uint64 {
	rest, ok := strings.CutPrefix(record, "goroutine ")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, " ")
	v, _ := strconv.ParseUint(n, 10, 64)
	return v
}

// running returns the numbers of the goroutines running now.
func running() map[uint64]bool {
	ids := map[uint64]bool{}
	for _, r := range waitfor.Goroutines() {
		ids[id(r)] = true
	}
	return ids
}

// runtimeOwn are functions of goroutines the runtime starts for itself
// as a program runs: in js/wasm, the one that runs a JavaScript event's
// Go callback.
var runtimeOwn = []string{"runtime.handleEvent("}

// started returns the stacks of the goroutines not in before, but those
// that contain one of ignore or of runtimeOwn.
func started(before map[uint64]bool, ignore []string) []string {
	var out []string
next:
	for _, r := range waitfor.Goroutines() {
		if before[id(r)] {
			continue
		}
		for _, s := range slices.Concat(runtimeOwn, ignore) {
			if strings.Contains(r, s) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}
