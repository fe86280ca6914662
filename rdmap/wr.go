package rdmap

import (
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/ddp"
)

// SGE is one scatter/gather element: Length octets of MR from Offset.
type SGE struct {
	MR     *MemoryRegion
	Offset uint64
	Length uint32
}

// SendWR is a Send work request: one of the four Send variants of RFC 5040
// §5.3, chosen by Solicited and Invalidate.
type SendWR struct {
	ID  uint64
	SGL []SGE
	// Solicited asks the peer for a Solicited Event (Send with SE).
	Solicited bool
	// Invalidate, when set, makes this a Send with Invalidate: the peer
	// invalidates InvalidateSTag when the Send is delivered.
	Invalidate     bool
	InvalidateSTag uint32
	// Inline copies the payload when the request is posted, so the
	// memory can be reused at once; at most QPConfig.MaxInline octets.
	Inline bool
	// Unsignaled suppresses the completion on success.
	Unsignaled bool
	// Fence holds this request until every earlier RDMA Read has
	// completed (RFC 5040 §5.5, rule 12's note).
	Fence bool
}

// WriteWR is an RDMA Write work request (RFC 5040 §5.1): the SGL is
// gathered and placed at the peer's RemoteSTag from RemoteTO.
type WriteWR struct {
	ID         uint64
	SGL        []SGE
	RemoteSTag uint32
	RemoteTO   uint64
	Inline     bool
	Unsignaled bool
	Fence      bool
}

// ReadWR is an RDMA Read work request (RFC 5040 §5.2): Local.Length
// octets are read from the peer's RemoteSTag at RemoteTO into Local. The
// local region needs LocalWrite; its STag goes to the peer as the Data
// Sink STag.
type ReadWR struct {
	ID         uint64
	Local      SGE
	RemoteSTag uint32
	RemoteTO   uint64
	Unsignaled bool
	Fence      bool
}

// RecvWR is a receive work request: a buffer for one incoming Send.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// Errors from posting.
var (
	ErrNotRunning   = errors.New("rdmap: the queue pair is not running")
	ErrSendQueue    = errors.New("rdmap: the send queue is full")
	ErrRecvQueue    = errors.New("rdmap: the receive queue is full")
	ErrInlineTooBig = errors.New("rdmap: inline data is larger than the queue pair's MaxInline")
)

// How a stream's LLP stream ended, as QueuePair.Err and the flushed
// completions report it (test with errors.Is): the peer disconnected in
// order (EventDisconnected), or the stream was lost (EventStreamError).
var (
	ErrDisconnected = ddp.ErrDisconnected
	ErrLLPLost      = ddp.ErrLLPLost
)

// resolve turns an SGL into slices of registered memory, checking that
// every region is valid, in the queue pair's domain, in bounds and has
// the rights needed.
func (qp *QueuePair) resolve(sgl []SGE, need Access) ([][]byte, uint64, error) {
	return qp.resolveInto(make([][]byte, 0, len(sgl)), sgl, need)
}

// resolveInto is resolve appending to out, which may have room already.
func (qp *QueuePair) resolveInto(out [][]byte, sgl []SGE, need Access) ([][]byte, uint64, error) {
	var total uint64
	for i, s := range sgl {
		b, err := qp.resolveOne(s, need)
		if err != nil {
			return nil, 0, fmt.Errorf("SGE %d: %w", i, err)
		}
		out = append(out, b)
		total += uint64(len(b))
	}
	if total >= 1<<32 {
		return nil, 0, fmt.Errorf("rdmap: a message of %d octets is not less than 2^32 (RFC 5041 §5.2)", total)
	}
	return out, total, nil
}

func (qp *QueuePair) resolveOne(s SGE, need Access) ([]byte, error) {
	if s.MR == nil {
		return nil, errors.New("rdmap: SGE without a memory region")
	}
	r := s.MR.r
	d := qp.pd.dev
	d.mu.RLock()
	valid := r.valid
	d.mu.RUnlock()
	switch {
	case !valid:
		return nil, fmt.Errorf("%w: STag %#08x", ErrInvalidSTag, r.stag)
	case r.pd != qp.pd:
		return nil, fmt.Errorf("%w: STag %#08x", ErrWrongPD, r.stag)
	case r.access&need != need:
		return nil, fmt.Errorf("%w: STag %#08x has %v", ErrRights, r.stag, r.access)
	case s.Offset > uint64(len(r.mem)) || uint64(s.Length) > uint64(len(r.mem))-s.Offset:
		return nil, fmt.Errorf("%w: %d octets at offset %d of a %d-octet region", ErrBounds, s.Length, s.Offset, len(r.mem))
	}
	return r.mem[s.Offset : s.Offset+uint64(s.Length)], nil
}
