//go:build !js

package mpa

import (
	"runtime"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
)

// A window of RDMA Reads kept full over a real TCP connection allocates
// nothing per Read on either side once warm: the send queue never
// empties, so completions taking from its front make it slide along its
// array, which must not grow a new one (as append did); the Responses,
// their FPDUs and the outstanding lists reuse theirs.
func TestReadWindowAllocatesNothing(t *testing.T) {
	noLeaks(t)
	const window, size = 8, 16 << 10
	a, b := newPeer(t, rdmap.QPConfig{SendDepth: 16, IRD: window, ORD: window}), newPeer(t, rdmap.QPConfig{SendDepth: 16, IRD: window, ORD: window})
	connectPair(t, Config{}, Config{}, a, b)
	src := b.Reg(t, size, rdmap.RemoteRead)
	sink := a.Reg(t, size, rdmap.LocalWrite)
	wr := rdmap.ReadWR{Local: rdmap.SGE{MR: sink, Length: size}, RemoteSTag: src.STag()}
	post := func() {
		if err := a.QP.PostRead(wr); err != nil {
			t.Fatal(err)
		}
	}
	ctx := tctx(t) // one context, as a program's loop would wait with
	next := func() {
		if c, err := a.SCQ.Wait(ctx); err != nil || c.Status != rdmap.StatusSuccess {
			t.Fatalf("completion %+v, %v", c, err)
		}
	}
	for range window {
		post()
	}
	keepFull := func() { next(); post() }
	for range 2000 {
		keepFull() // warm: buffers grown, spare entries made
	}
	// testing.AllocsPerRun rounds down to whole allocations per run;
	// one allocation every few Reads must show.
	const runs = 2000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		keepFull()
	}
	runtime.ReadMemStats(&after)
	if n := float64(after.Mallocs-before.Mallocs) / runs; n > 0.01 {
		t.Errorf("%.3f allocations per Read", n)
	}
	for range window {
		next()
	}
}
