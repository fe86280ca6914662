package rdmap

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

// counterWorkload is what each of several connections does to one
// responder's memory: adds FetchAdds of 1 to the counter word at TO 0
// (window of them outstanding at a time, up to the AtomicORD), then takes
// the lock word at TO 8 locks times with CmpSwap (0 to its own id), adds
// one to the word at TO 16 with an RDMA Read and an RDMA Write while it
// holds the lock, and gives the lock back with CmpSwap (its id to 0). It
// returns the original values its FetchAdds saw.
func counterWorkload(ctx context.Context, qp *QueuePair, pd *ProtectionDomain, cq *CompletionQueue, stag uint32, id uint64, adds, window, locks int) ([]uint64, error) {
	local, err := pd.RegisterMemory(make([]byte, 8*(window+2)), 0, LocalWrite)
	if err != nil {
		return nil, err
	}
	next := func(want WorkOp) (Completion, error) {
		c, err := cq.Wait(ctx)
		if err == nil && (c.Status != StatusSuccess || c.Op != want) {
			err = fmt.Errorf("completion %+v, want %v: %v", c, want, c.Err)
		}
		return c, err
	}
	var seen []uint64
	for done := 0; done < adds; {
		n := min(window, adds-done)
		for i := range n {
			if err := qp.PostAtomic(AtomicWR{ID: uint64(i), Op: FetchAdd, Add: 1, Local: SGE{MR: local, Offset: uint64(8 * i), Length: 8}, RemoteSTag: stag}); err != nil {
				return nil, err
			}
		}
		for range n {
			c, err := next(WorkFetchAdd)
			if err != nil {
				return nil, err
			}
			seen = append(seen, word(local, int(8*c.WRID)))
		}
		done += n
	}
	lockRes := SGE{MR: local, Offset: uint64(8 * window), Length: 8}
	val := SGE{MR: local, Offset: uint64(8*window + 8), Length: 8}
	for range locks {
		for {
			if err := qp.PostAtomic(AtomicWR{Op: CmpSwap, Compare: 0, Swap: id, Local: lockRes, RemoteSTag: stag, RemoteTO: 8}); err != nil {
				return nil, err
			}
			if _, err := next(WorkCompSwap); err != nil {
				return nil, err
			}
			if word(local, 8*window) == 0 {
				break
			}
		}
		if err := qp.PostRead(ReadWR{Local: val, RemoteSTag: stag, RemoteTO: 16}); err != nil {
			return nil, err
		}
		if _, err := next(WorkRead); err != nil {
			return nil, err
		}
		setWord(local, 8*window+8, word(local, 8*window+8)+1)
		if err := qp.PostWrite(WriteWR{SGL: []SGE{val}, RemoteSTag: stag, RemoteTO: 16, Unsignaled: true}); err != nil {
			return nil, err
		}
		if err := qp.PostAtomic(AtomicWR{Op: CmpSwap, Compare: id, Swap: 0, Local: lockRes, RemoteSTag: stag, RemoteTO: 8}); err != nil {
			return nil, err
		}
		if _, err := next(WorkCompSwap); err != nil {
			return nil, err
		}
		if got := word(local, 8*window); got != id {
			return nil, fmt.Errorf("connection %d released a lock held by %d", id, got)
		}
	}
	return seen, nil
}

// checkCounters checks the totals: every FetchAdd saw a different
// original value, 0 to conns*adds-1; the counter is conns*adds; the lock is
// free; the guarded word is conns*locks (no update under the lock was
// lost).
func checkCounters(t *testing.T, mem []byte, seen [][]uint64, adds, locks int) {
	t.Helper()
	total := len(seen) * adds
	got := make([]bool, total)
	for _, s := range seen {
		for _, v := range s {
			if v >= uint64(total) || got[v] {
				t.Fatalf("FetchAdd original value %d seen twice or out of range", v)
			}
			got[v] = true
		}
	}
	w := func(off int) uint64 { return wordOf(mem[off:]) }
	if w(0) != uint64(total) || w(8) != 0 || w(16) != uint64(len(seen)*locks) {
		t.Fatalf("counter %d (want %d), lock %d (want 0), guarded %d (want %d)", w(0), total, w(8), w(16), len(seen)*locks)
	}
	t.Logf("%d connections: %d FetchAdds, %d locked updates", len(seen), total, len(seen)*locks)
}

// Atomic Operations from several connections to one counter and one lock
// word on one device: "Atomicity of the Read-Modify-Write (RMW) on the
// Responder's node by the Atomic Operation MUST be assured in the context
// of concurrent atomic accesses by other RDMAP Streams on the same RNIC"
// (RFC 7306 §5.3).
func TestAtomicConcurrentStreams(t *testing.T) {
	const conns, adds, window, locks = 6, 1000, 8, 60
	dev := NewDevice(DeviceConfig{})
	pd := dev.NewProtectionDomain()
	shared, err := pd.RegisterMemory(make([]byte, 64), 0, RemoteAtomic|RemoteRead|RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := make([][]uint64, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		ea, eb := ddptest.New(ddptest.Options{Reorder: i % 3 * 4, Seed: uint64(i), MULPDU: 100 + 50*i})
		win := 1
		if i%3 != 0 {
			win = 64
		}
		req := newSide(t, ea, QPConfig{Window: win})
		rcq := dev.NewCompletionQueue(64)
		resp, err := pd.NewQueuePair(QPConfig{SendCQ: rcq, RecvCQ: rcq, Window: win})
		if err != nil {
			t.Fatal(err)
		}
		ea.Attach(req.qp.Stream())
		eb.Attach(resp.Stream())
		req.qp.Start(ea, ddp.Start{})
		resp.Start(eb, ddp.Start{})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req.qp.Close(ctx)
			resp.Close(ctx)
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen[i], errs[i] = counterWorkload(ctx, req.qp, req.pd, req.scq, shared.STag(), uint64(i+1), adds, window, locks)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	checkCounters(t, shared.Bytes(), seen, adds, locks)
}
