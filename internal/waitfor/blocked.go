package waitfor

import (
	"bytes"
	"runtime"
	"strings"
)

// Blocked reports whether a goroutine that the function named creator
// started waits, in a function whose name contains fn, on a channel, a
// select or the network poller: for a test that must act only once a
// read is blocked, such as setting the deadline or closing that must
// wake it.
func Blocked(creator, fn string) bool {
	for _, g := range Goroutines() {
		header, _, _ := strings.Cut(g, "\n")
		waiting := strings.Contains(header, "[select") || strings.Contains(header, "[chan receive") || strings.Contains(header, "[IO wait")
		if waiting && strings.Contains(g, fn) && strings.Contains(g, "created by "+creator) {
			return true
		}
	}
	return false
}

// Goroutines returns every goroutine's stack as runtime.Stack prints it,
// one record each, beginning "goroutine N [state]:".
func Goroutines() []string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(bytes.TrimSpace(buf[:n])), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
