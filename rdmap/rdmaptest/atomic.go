package rdmaptest

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// AtomicWorkload is what each connection of a transport's concurrent
// atomics test does to the responder's memory (as rdmap's
// TestAtomicConcurrentStreams): adds FetchAdds of 1 to the
// counter at TO 0, window at a time; then locks times it takes the lock
// word at TO 8 with CmpSwap (0 to id), adds one to the word at TO 16 with
// an RDMA Read and an RDMA Write, and gives the lock back with CmpSwap.
// It returns the original values its FetchAdds saw. The responder's
// region needs RemoteAtomic, RemoteRead and RemoteWrite on its first 24
// octets.
func AtomicWorkload(ctx context.Context, p *Peer, stag uint32, id uint64, adds, window, locks int) ([]uint64, error) {
	local, err := p.PD.RegisterMemory(make([]byte, 8*(window+2)), 0, rdmap.LocalWrite)
	if err != nil {
		return nil, err
	}
	w := func(i int) uint64 { return binary.NativeEndian.Uint64(local.Bytes()[8*i:]) }
	next := func(want rdmap.WorkOp) (rdmap.Completion, error) {
		c, err := p.SCQ.Wait(ctx)
		if err == nil && (c.Status != rdmap.StatusSuccess || c.Op != want) {
			err = fmt.Errorf("completion %+v, want %v: %v", c, want, c.Err)
		}
		return c, err
	}
	var seen []uint64
	for done := 0; done < adds; {
		n := min(window, adds-done)
		err := p.QP.PostBatch(func() error {
			for i := range n {
				if err := p.QP.PostAtomic(rdmap.AtomicWR{ID: uint64(i), Op: rdmap.FetchAdd, Add: 1,
					Local: rdmap.SGE{MR: local, Offset: uint64(8 * i), Length: 8}, RemoteSTag: stag}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for range n {
			c, err := next(rdmap.WorkFetchAdd)
			if err != nil {
				return nil, err
			}
			seen = append(seen, w(int(c.WRID)))
		}
		done += n
	}
	lockRes := rdmap.SGE{MR: local, Offset: uint64(8 * window), Length: 8}
	val := rdmap.SGE{MR: local, Offset: uint64(8*window + 8), Length: 8}
	for range locks {
		for {
			if err := p.QP.PostAtomic(rdmap.AtomicWR{Op: rdmap.CmpSwap, Compare: 0, Swap: id, Local: lockRes, RemoteSTag: stag, RemoteTO: 8}); err != nil {
				return nil, err
			}
			if _, err := next(rdmap.WorkCompSwap); err != nil {
				return nil, err
			}
			if w(window) == 0 {
				break
			}
		}
		if err := p.QP.PostRead(rdmap.ReadWR{Local: val, RemoteSTag: stag, RemoteTO: 16}); err != nil {
			return nil, err
		}
		if _, err := next(rdmap.WorkRead); err != nil {
			return nil, err
		}
		binary.NativeEndian.PutUint64(local.Bytes()[8*window+8:], w(window+1)+1)
		// The Write is placed before the Atomic Request after it is
		// carried out: RFC 7306 §7, "RDMA Write, Atomic".
		err := p.QP.PostBatch(func() error {
			if err := p.QP.PostWrite(rdmap.WriteWR{SGL: []rdmap.SGE{val}, RemoteSTag: stag, RemoteTO: 16, Unsignaled: true}); err != nil {
				return err
			}
			return p.QP.PostAtomic(rdmap.AtomicWR{Op: rdmap.CmpSwap, Compare: id, Swap: 0, Local: lockRes, RemoteSTag: stag, RemoteTO: 8})
		})
		if err != nil {
			return nil, err
		}
		if _, err := next(rdmap.WorkCompSwap); err != nil {
			return nil, err
		}
		if got := w(window); got != id {
			return nil, fmt.Errorf("connection %d released a lock held by %d", id, got)
		}
	}
	return seen, nil
}

// CheckAtomicTotals checks what AtomicWorkload left in the shared region
// after len(seen) connections ran it with adds and locks: every FetchAdd
// saw a different original value, the counter at TO 0 is their number,
// the lock at TO 8 is free, and no update under the lock was lost (the
// word at TO 16). Call it once the responders have stopped.
func CheckAtomicTotals(t testing.TB, shared *rdmap.MemoryRegion, seen [][]uint64, adds, locks int) {
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
	w := func(off int) uint64 { return binary.NativeEndian.Uint64(shared.Bytes()[off:]) }
	if w(0) != uint64(total) || w(8) != 0 || w(16) != uint64(len(seen)*locks) {
		t.Fatalf("counter %d (want %d), lock %d, guarded %d (want %d)", w(0), total, w(8), w(16), len(seen)*locks)
	}
}

// RunAtomics runs AtomicWorkload on every requester at once against the
// shared region (requester i with the lock id i+1), then calls stop,
// which must stop the responders (their goroutines wrote the memory: once
// they have, it is the test's to read), and checks the outcome with
// CheckAtomicTotals.
func RunAtomics(t testing.TB, ctx context.Context, requesters []*Peer, shared *rdmap.MemoryRegion, stop func(), adds, window, locks int) {
	t.Helper()
	seen := make([][]uint64, len(requesters))
	errs := make([]error, len(requesters))
	var wg sync.WaitGroup
	for i, a := range requesters {
		wg.Go(func() {
			seen[i], errs[i] = AtomicWorkload(ctx, a, shared.STag(), uint64(i+1), adds, window, locks)
		})
	}
	wg.Wait()
	stop()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("requester %d: %v", i, err)
		}
	}
	CheckAtomicTotals(t, shared, seen, adds, locks)
}

// AtomicTarget returns a device of its own, a protection domain on it
// and, registered there with the rights a remote requester needs, the
// 64-octet region whose words RunAtomics works on.
func AtomicTarget(t testing.TB) (*rdmap.Device, *rdmap.ProtectionDomain, *rdmap.MemoryRegion) {
	t.Helper()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	shared, err := pd.RegisterMemory(make([]byte, 64), 0, rdmap.RemoteAtomic|rdmap.RemoteRead|rdmap.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	return dev, pd, shared
}

// CloseAll closes the queue pairs, giving each 2 s to drain: RunAtomics's
// stop for the responders.
func CloseAll(qps []*rdmap.QueuePair) {
	for _, qp := range qps {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		qp.Close(ctx)
		cancel()
	}
}
