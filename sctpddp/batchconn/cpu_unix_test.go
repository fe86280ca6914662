//go:build unix

package batchconn

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, the process has
// used: on a busy machine, a steadier cost than the time elapsed.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
