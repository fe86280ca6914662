package perf

import (
	"context"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/rdmap"
)

// run connects to ts with cfg and runs one size.
func run(t *testing.T, ts *testServer, cfg ClientConfig, size int) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg = ts.connectCfg(t, cfg)
	if cfg.MaxSize == 0 {
		cfg.MaxSize = size
	}
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("%v lat %v: %v", cfg.Op, cfg.Lat, err)
	}
	defer c.Close()
	st, err := c.Run(ctx, size)
	if err != nil {
		t.Fatalf("%v lat %v raw %v: %v", cfg.Op, cfg.Lat, cfg.CompareRaw, err)
	}
	return st
}

// checkStats checks a result's shape.
func checkStats(t *testing.T, what string, st Stats, size, iters int, raw, lat bool) {
	t.Helper()
	ok := st.Bytes == size && st.Iterations == iters && st.BWAvg > 0 && st.BWPeak >= st.BWAvg && st.MsgRate > 0
	if lat {
		ok = ok && st.Lat != nil && st.Lat.Min > 0 && st.Lat.Min <= st.Lat.Typical && st.Lat.Typical <= st.Lat.Max
	}
	if raw {
		ok = ok && st.Raw != nil && st.Ratio != nil && *st.Ratio > 0 && st.Raw.Iterations == iters && st.Raw.Method != ""
		if lat {
			ok = ok && st.Raw.Lat != nil && st.Raw.Lat.Typical > 0
		}
	}
	if !ok {
		t.Errorf("%s: %+v raw %+v", what, st, st.Raw)
	}
}

func TestPerfLoopbackTCP(t *testing.T) {
	ts := startServer(t, "tcp", Limits{})
	for _, op := range []Op{OpWrite, OpRead, OpSend, OpAtomic} {
		size := 4096
		if op == OpAtomic {
			size = 8
		}
		for _, raw := range []bool{false, true} {
			st := run(t, ts, ClientConfig{Op: op, CompareRaw: raw, Iters: 200}, size)
			checkStats(t, op.String()+" bw", st, size, 200, raw, false)
			if raw && !st.Raw.CRC32c {
				t.Errorf("%v: the raw TCP stream computed no CRC32c although MPA did", op)
			}
			st = run(t, ts, ClientConfig{Op: op, Lat: true, CompareRaw: raw, Iters: 50}, min(size, 64))
			checkStats(t, op.String()+" lat", st, min(size, 64), 50, raw, true)
		}
	}
	// CmpSwap, and the sizes a raw stream gathers and cuts into pieces.
	st := run(t, ts, ClientConfig{Op: OpAtomic, Atomic: rdmap.CmpSwap, Iters: 100, CompareRaw: true}, 8)
	checkStats(t, "CmpSwap bw", st, 8, 100, true, false)
	for _, size := range []int{65536, 3 << 20} {
		st := run(t, ts, ClientConfig{Op: OpRead, Iters: 10, CompareRaw: true}, size)
		checkStats(t, "read bw", st, size, 10, true, false)
		st = run(t, ts, ClientConfig{Op: OpSend, Lat: true, Iters: 10, CompareRaw: true}, size)
		checkStats(t, "send lat", st, size, 10, true, true)
	}
	// The last connection may still be closing.
	if !waitfor.Until(5*time.Second, func() bool { n, b := ts.srv.Usage(); return n == 0 && b == 0 }) {
		n, b := ts.srv.Usage()
		t.Errorf("after the clients: %d connections, %d octets still counted", n, b)
	}
}

func TestPerfLoopbackSCTP(t *testing.T) {
	ts := startServer(t, "sctp", Limits{})
	st := run(t, ts, ClientConfig{Op: OpWrite, Iters: 50, CompareRaw: true}, 65536)
	checkStats(t, "write bw", st, 65536, 50, true, false)
	if st.Raw.CRC32c || st.Raw.Transport != "sctp" {
		t.Errorf("raw SCTP: %+v", st.Raw)
	}
	st = run(t, ts, ClientConfig{Op: OpRead, Iters: 50, CompareRaw: true}, 65536)
	checkStats(t, "read bw", st, 65536, 50, true, false)
	for _, op := range []Op{OpSend, OpRead, OpAtomic} {
		size := 64
		if op == OpAtomic {
			size = 8
		}
		st = run(t, ts, ClientConfig{Op: op, Lat: true, Iters: 20, CompareRaw: true}, size)
		checkStats(t, op.String()+" lat", st, size, 20, true, true)
	}
	st = run(t, ts, ClientConfig{Op: OpAtomic, Iters: 100, CompareRaw: true}, 8)
	checkStats(t, "atomic bw", st, 8, 100, true, false)
}

// TestPerfDuration: --duration runs, which learn their end only after
// posting, and runs whose length is no multiple of --cq-mod, count every
// operation and end.
func TestPerfDuration(t *testing.T) {
	ts := startServer(t, "tcp", Limits{})
	for _, op := range []Op{OpWrite, OpRead, OpSend, OpAtomic} {
		size := 1000
		if op == OpAtomic {
			size = 8
		}
		st := run(t, ts, ClientConfig{Op: op, Iters: 107, Depth: 10, CQMod: 3}, size)
		checkStats(t, op.String()+" --cq-mod 3", st, size, 107, false, false)
		st = run(t, ts, ClientConfig{Op: op, Duration: 200 * time.Millisecond, CQMod: 7}, size)
		if st.Iterations < 7 || st.Seconds < 0.2 || st.BWAvg <= 0 {
			t.Errorf("%v --duration 200ms: %+v", op, st)
		}
	}
}
