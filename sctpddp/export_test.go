//go:build !js

package sctpddp

// What the external tests (package sctpddp_test: sessions over package
// datachannel, which imports this one) share with this package's own.
var (
	CheckGoroutines     = checkGoroutines
	TestCtx             = testCtx
	BenchCtx            = benchCtx
	NewPeer             = newPeer
	WaitC               = waitC
	BenchMover          = benchMover
	NewRDMAWriteMoverOn = newRDMAWriteMoverOn
	ReadSegmentChunk    = readSegmentChunk
)
