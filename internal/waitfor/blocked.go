package waitfor

import (
	"runtime"
	"strings"
)

// Blocked reports whether a goroutine that the function named creator
// started waits, in a function whose name contains fn, on a channel, a
// select or the network poller: for a test that must act only once a
// read is blocked, such as setting the deadline or closing that must
// wake it.
func Blocked(creator, fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		waiting := strings.Contains(header, "[select") || strings.Contains(header, "[chan receive") || strings.Contains(header, "[IO wait")
		if waiting && strings.Contains(g, fn) && strings.Contains(g, "created by "+creator) {
			return true
		}
	}
	return false
}
