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
// §5.3, chosen by Solicited and Invalidate; or, with WithImm, an Immediate
// Data message of RFC 7306 §6 (IBV_WR_SEND_WITH_IMM's place).
type SendWR struct {
	ID  uint64
	SGL []SGE
	// Solicited asks the peer for a Solicited Event (Send with SE, or
	// Immediate Data with SE).
	Solicited bool
	// WithImm sends an Immediate Data message instead of a Send: Imm's 8
	// octets (big-endian) go to the peer's next receive buffer, whose
	// completion reports them (WorkRecvWithImm, FlagImm, Completion.Imm).
	// RFC 7306 lets no ULP payload ride with Immediate Data (its Figure
	// 3), so the SGL must be empty and Invalidate unset; the receive buffer
	// must hold at least 8 octets. It completes as a Send does (§6.4), as
	// WorkSend.
	WithImm bool
	Imm     uint64
	// Invalidate, when set, makes this a Send with Invalidate: the peer
	// invalidates InvalidateSTag when the Send is delivered.
	Invalidate     bool
	InvalidateSTag uint32
	// Inline copies the payload when the request is posted, so the
	// memory can be reused at once; at most QPConfig.MaxInline octets.
	Inline bool
	// Data, when not nil, is the payload itself, in memory that needs no
	// registration: it is copied when the request is posted, as Inline
	// copies an SGL's (at most QPConfig.MaxInline octets), and SGL must
	// be empty. For small messages: a request, a reply, a credit.
	Data []byte
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
	// WithImm follows the Write with an Immediate Data message carrying
	// Imm: "When an Immediate Data message is sent following an RDMA Write
	// Message, the combination of the two messages is an implementation of
	// RDMA Write with Immediate message" (RFC 7306 §1; verbs'
	// IBV_WR_RDMA_WRITE_WITH_IMM). The peer's next receive buffer takes
	// the 8 octets, and its completion comes after the Write is placed
	// (RFC 7306 §7). Solicited makes it Immediate Data with SE.
	WithImm   bool
	Imm       uint64
	Solicited bool
}

// AtomicWR is an Atomic Operation work request (RFC 7306 §5), verbs'
// IBV_WR_ATOMIC_FETCH_AND_ADD and IBV_WR_ATOMIC_CMP_AND_SWP and their
// masked forms: the peer reads the 64-bit word at RemoteSTag and
// RemoteTO, which must be 64-bit aligned and allow RemoteAtomic, changes
// it atomically and returns its original value, which lands in Local.
type AtomicWR struct {
	ID uint64
	Op AtomicOp // FetchAdd or CmpSwap
	// Local is 8 octets with LocalWrite rights: the Original Remote Data
	// Value is written there, in the machine's byte order
	// (binary.NativeEndian), when the Atomic Response arrives.
	Local      SGE
	RemoteSTag uint32
	RemoteTO   uint64
	// FetchAdd: Add is added to the remote value. With Masked, AddMask
	// marks the most significant bit of each field of the 64-bit value,
	// and each field is added on its own, its carry discarded (RFC 7306
	// §5.1.1); without, the whole 64 bits are added (an Add Mask of 0).
	Add, AddMask uint64
	// CmpSwap: if the remote value equals Compare, it is replaced with
	// Swap. With Masked, only the bits of CompareMask are compared and only
	// those of SwapMask replaced (§5.1.2); without, all 64 bits are (masks
	// of all ones).
	Compare, CompareMask uint64
	Swap, SwapMask       uint64
	Masked               bool
	Unsignaled           bool
	// Fence holds this request until every earlier RDMA Read and Atomic
	// Operation has completed.
	Fence bool
}

// request returns the Atomic Operation Request Header of wr, with the
// fields that an operation does not use set as RFC 7306 §5.2.1 says:
// "For Atomic Operations FetchAdd and Atomic Swap, the Compare Data field
// is set to zero on transmit" and the Compare Mask "is set to
// ffffffffffffffffh on transmit".
func (wr *AtomicWR) request() (AtomicRequest, error) {
	r := AtomicRequest{Op: wr.Op, STag: wr.RemoteSTag, TO: wr.RemoteTO}
	switch wr.Op {
	case FetchAdd:
		r.AddSwapData, r.CompareMask = wr.Add, ^uint64(0)
		if wr.Masked {
			r.AddSwapMask = wr.AddMask
		}
	case CmpSwap:
		r.AddSwapData, r.CompareData = wr.Swap, wr.Compare
		r.AddSwapMask, r.CompareMask = ^uint64(0), ^uint64(0)
		if wr.Masked {
			r.AddSwapMask, r.CompareMask = wr.SwapMask, wr.CompareMask
		}
	default:
		return r, fmt.Errorf("rdmap: %v is not an Atomic Operation (FetchAdd or CmpSwap)", wr.Op)
	}
	return r, nil
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
	// ErrNotSupported: the queue pair was made without the RFC 7306
	// extension the work request needs (QPConfig.NoAtomics, NoImmediate).
	ErrNotSupported = errors.New("rdmap: the queue pair does not implement this RFC 7306 operation")
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
