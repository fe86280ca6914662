//go:build !unix && !js

package batchconn

import "time"

// processCPU returns 0: the benchmarks report no CPU time here.
func processCPU() time.Duration { return 0 }
