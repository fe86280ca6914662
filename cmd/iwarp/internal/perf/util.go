package perf

import (
	"context"

	"github.com/iwarpgo/iwarp/rdmap"
)

// recvBuffers is a set of receive buffers posted and reposted on a queue
// pair, WRIDs base+i.
type recvBuffers struct {
	qp   *rdmap.QueuePair
	mrs  []*rdmap.MemoryRegion
	base uint64
}

func newRecvBuffers(pd *rdmap.ProtectionDomain, qp *rdmap.QueuePair, n, size int, base uint64) (*recvBuffers, error) {
	r := &recvBuffers{qp: qp, base: base}
	for i := 0; i < n; i++ {
		mr, err := pd.RegisterMemory(make([]byte, size), 0, rdmap.LocalWrite)
		if err != nil {
			r.close()
			return nil, err
		}
		r.mrs = append(r.mrs, mr)
		if err := r.post(i); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *recvBuffers) post(i int) error {
	return r.qp.PostRecv(rdmap.RecvWR{ID: r.base + uint64(i), SGL: []rdmap.SGE{{MR: r.mrs[i], Length: uint32(r.mrs[i].Len())}}})
}

// take returns the octets of a receive completion's buffer, and a
// function that posts the buffer again (once they have been used). A
// completion that is none of the set's gives no octets.
func (r *recvBuffers) take(c rdmap.Completion) ([]byte, func() error) {
	i := c.WRID - r.base
	if c.WRID < r.base || i >= uint64(len(r.mrs)) || int(c.ByteLen) > r.mrs[i].Len() {
		return nil, func() error { return nil }
	}
	return r.mrs[i].Bytes()[:c.ByteLen], func() error { return r.post(int(i)) }
}

func (r *recvBuffers) close() {
	for _, mr := range r.mrs {
		mr.Deregister()
	}
}

// waitEither returns a completion of scq if one is there, or else waits
// for one of rcq (the same CQ, or one that the caller only waits on).
func waitEither(ctx context.Context, scq, rcq *rdmap.CompletionQueue) (rdmap.Completion, error) {
	if scq != rcq {
		var one [1]rdmap.Completion
		if scq.Poll(one[:]) == 1 {
			return one[0], nil
		}
	}
	return rcq.Wait(ctx)
}

// sendCtl posts a control message from mr, a registered buffer of CtlLen
// octets, inline (the octets are taken when it is posted).
func sendCtl(qp *rdmap.QueuePair, mr *rdmap.MemoryRegion, id uint64, c Ctl) error {
	c.Append(mr.Bytes()[:0])
	return qp.PostSend(rdmap.SendWR{ID: id, SGL: []rdmap.SGE{{MR: mr, Length: CtlLen}}, Inline: true})
}
