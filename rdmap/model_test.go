package rdmap

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/iwarpgo/iwarp/ddp/ddptest"
)

// TestModelRandomOperations runs random RDMA Writes, RDMA Reads and Sends
// of random sizes, RFC 7306's Atomic Operations (FetchAdd and CmpSwap,
// plain and masked) and Immediate Data (alone and after a Write), over
// reordering pipes with random MULPDUs, and checks every completion and
// every byte against a reference model of both peers' memory.
//
// RDMA places data in any order (RFC 5040 §5.5 rule 3) and a Read Response
// may carry data of a later Write (rule 12's note), so each batch of
// operations touches disjoint slots of memory; between batches all
// completions are awaited, which makes the model exact. In two of the
// four runs about half of the batches are posted as one list
// (PostBatch) to an LLP that holds them until the list ends.
func TestModelRandomOperations(t *testing.T) {
	const (
		slot   = 2048
		slots  = 32
		batch  = 16
		perRun = 25000
	)
	total := 0
	for run := uint64(0); run < 4; run++ {
		rng := rand.New(rand.NewPCG(run, 0x5eed))
		mulpdu := 40 + rng.IntN(1500)
		// Runs 1 and 3 post some batches as one list (PostBatch) to an
		// LLP that keeps segments until it is flushed, as MPA's gather
		// list does.
		batcher := run%2 == 1
		a, b := newPair(t, pairOpts{
			pipe: ddptest.Options{MULPDU: mulpdu, Reorder: 1 + rng.IntN(16), Seed: run, Depth: 512},
			cfg: QPConfig{SendDepth: batch, RecvDepth: batch, IRD: batch, ORD: 1 + rng.IntN(batch),
				AtomicIRD: batch, AtomicORD: 1 + rng.IntN(batch)},
			hold: batcher,
		})
		target := b.reg(t, slot*slots, RemoteWrite|RemoteRead|RemoteAtomic)
		recv := b.reg(t, slot*batch, LocalWrite)
		src := a.reg(t, slot*slots, 0)
		sink := a.reg(t, slot*slots, LocalWrite)
		modelT := make([]byte, target.Len())
		modelK := make([]byte, sink.Len())
		for ops := 0; ops < perRun; {
			fill(src.Bytes(), byte(rng.Uint32()))
			perm := rng.Perm(slots)
			type sendCheck struct {
				data []byte
				imm  *uint64 // Immediate Data: its value
			}
			var sends []sendCheck
			type expect struct {
				op WorkOp
				n  uint32
			}
			var want []expect
			nrecv := 0
			postOps := func() error {
				for i := 0; i < batch; i++ {
					n := rng.IntN(slot + 1)
					if rng.IntN(8) == 0 {
						n = 0
					}
					off := rng.IntN(slot - n + 1)
					s := uint64(perm[i]*slot + off) // this op's slot, in T or K
					srcOff := uint64(rng.IntN(len(src.Bytes()) - n + 1))
					var err error
					switch rng.IntN(6) {
					case 0:
						err = a.qp.PostWrite(WriteWR{ID: uint64(i), SGL: []SGE{{MR: src, Offset: srcOff, Length: uint32(n)}}, RemoteSTag: target.STag(), RemoteTO: s})
						copy(modelT[s:], src.Bytes()[srcOff:srcOff+uint64(n)])
						want = append(want, expect{WorkWrite, uint32(n)})
					case 1:
						err = a.qp.PostRead(ReadWR{ID: uint64(i), Local: SGE{MR: sink, Offset: s, Length: uint32(n)}, RemoteSTag: target.STag(), RemoteTO: s, Fence: rng.IntN(4) == 0})
						// T's slot s is untouched by this batch's writes, so
						// the Read returns the model's bytes.
						copy(modelK[s:], modelT[s:s+uint64(n)])
						want = append(want, expect{WorkRead, uint32(n)})
					case 2:
						b.qp.PostRecv(RecvWR{ID: uint64(nrecv), SGL: []SGE{{MR: recv, Offset: uint64(nrecv * slot), Length: slot}}})
						nrecv++
						err = a.qp.PostSend(SendWR{ID: uint64(i), SGL: []SGE{{MR: src, Offset: srcOff, Length: uint32(n)}}})
						sends = append(sends, sendCheck{data: append([]byte(nil), src.Bytes()[srcOff:srcOff+uint64(n)]...)})
						want = append(want, expect{WorkSend, uint32(n)})
					case 3, 4:
						// An Atomic Operation on an aligned word of T's slot;
						// the original value lands in K's.
						w := uint64(perm[i]*slot + 8*rng.IntN(slot/8))
						wr := AtomicWR{ID: uint64(i), Local: SGE{MR: sink, Offset: w, Length: 8}, RemoteSTag: target.STag(), RemoteTO: w,
							Add: rng.Uint64() >> rng.IntN(64), AddMask: rng.Uint64() & rng.Uint64(), Masked: rng.IntN(2) == 0}
						orig := binary.NativeEndian.Uint64(modelT[w:])
						wr.Compare, wr.CompareMask, wr.Swap, wr.SwapMask = rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
						if rng.IntN(2) == 0 {
							wr.Compare = orig // a compare that matches
						}
						op := WorkFetchAdd
						if rng.IntN(2) == 0 {
							wr.Op, op = CmpSwap, WorkCompSwap
						}
						req, _ := wr.request()
						v, _ := req.Apply(orig)
						binary.NativeEndian.PutUint64(modelT[w:], v)
						binary.NativeEndian.PutUint64(modelK[w:], orig)
						err = a.qp.PostAtomic(wr)
						want = append(want, expect{op, 8})
					case 5:
						// Immediate Data, alone or after a Write.
						b.qp.PostRecv(RecvWR{ID: uint64(nrecv), SGL: []SGE{{MR: recv, Offset: uint64(nrecv * slot), Length: slot}}})
						nrecv++
						imm := rng.Uint64()
						if rng.IntN(2) == 0 {
							err = a.qp.PostSend(SendWR{ID: uint64(i), WithImm: true, Imm: imm, Solicited: rng.IntN(2) == 0})
							want = append(want, expect{WorkSend, 0})
						} else {
							err = a.qp.PostWrite(WriteWR{ID: uint64(i), SGL: []SGE{{MR: src, Offset: srcOff, Length: uint32(n)}}, RemoteSTag: target.STag(), RemoteTO: s,
								WithImm: true, Imm: imm, Solicited: rng.IntN(2) == 0})
							copy(modelT[s:], src.Bytes()[srcOff:srcOff+uint64(n)])
							want = append(want, expect{WorkWrite, uint32(n)})
						}
						sends = append(sends, sendCheck{data: (&ImmediateData{Data: imm}).Append(nil), imm: &imm})
					}
					if err != nil {
						return err
					}
					ops++
				}
				return nil
			}
			var err error
			if batcher && rng.IntN(2) == 0 {
				err = a.qp.PostBatch(postOps)
			} else {
				err = postOps()
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				c := wait(t, a.scq)
				if c.WRID != uint64(i) || c.Op != w.op || c.ByteLen != w.n || c.Status != StatusSuccess {
					t.Fatalf("run %d op %d: completion %+v, want %v of %d", run, ops, c, w.op, w.n)
				}
			}
			for k, s := range sends {
				c := wait(t, b.rcq)
				if c.WRID != uint64(k) || c.ByteLen != uint32(len(s.data)) || c.Status != StatusSuccess ||
					!bytes.Equal(recv.Bytes()[k*slot:k*slot+len(s.data)], s.data) {
					t.Fatalf("run %d: receive %d: %+v", run, k, c)
				}
				if s.imm != nil && (c.Op != WorkRecvWithImm || c.Imm != *s.imm || c.Flags&FlagImm == 0) {
					t.Fatalf("run %d: receive %d: %+v, want Immediate Data %#x", run, k, c, *s.imm)
				}
			}
			// End the batch with a Send: once it is delivered, every Write
			// before it is placed (RFC 5040 §5.5 rule 10), so the next
			// batch may reuse the slots.
			b.qp.PostRecv(RecvWR{ID: 999, SGL: []SGE{{MR: recv, Length: 0}}})
			a.qp.PostSend(SendWR{ID: 999})
			if c := wait(t, a.scq); c.WRID != 999 || c.Status != StatusSuccess {
				t.Fatalf("run %d: barrier send %+v", run, c)
			}
			if c := wait(t, b.rcq); c.WRID != 999 || c.Status != StatusSuccess || c.ByteLen != 0 {
				t.Fatalf("run %d: barrier receive %+v", run, c)
			}
		}
		if he, ok := a.qp.llp.(*holdEnd); ok {
			gathered := false
			for _, n := range he.flushed() {
				gathered = gathered || n > 1
			}
			if !gathered {
				t.Errorf("run %d: no flush sent more than one segment", run)
			}
		}
		if !bytes.Equal(target.Bytes(), modelT) {
			t.Fatalf("run %d: target memory differs from the model", run)
		}
		if !bytes.Equal(sink.Bytes(), modelK) {
			t.Fatalf("run %d: read sink differs from the model", run)
		}
		total += perRun
	}
	t.Logf("%d random operations checked", total)
}
