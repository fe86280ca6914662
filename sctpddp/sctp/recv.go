package sctp

import (
	"errors"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// RecvDefaultSACKDelay is the delayed acknowledgement timeout used when
// ReceiverConfig.SACKDelay is 0. RFC 9260 §6.2 asks for a SACK "within 200
// ms of the arrival of any unacknowledged DATA chunk" and lets the
// administrator lower the delay "to meet the specific timing requirement
// of the protocol being carried". DDP's traffic is bulk transfers, which
// are acknowledged every second packet and never wait for the timer, and
// request/response exchanges (RDMA Read, Send and its reply), in which the
// timer delays the acknowledgement of the last, odd packet of a burst and
// with it the sender's completion and its congestion window. 25 ms bounds
// that stall to about a wide-area round trip, as QUIC's default
// max_ack_delay does (RFC 9000 §18.2), stays far below the sender's
// RTO.Min of 1 s so that it never causes a retransmission, and is still
// long enough for a SACK to ride on the reply of a request answered at
// once.
const RecvDefaultSACKDelay = 25 * time.Millisecond

// RecvMaxSACKDelay is the largest ReceiverConfig.SACKDelay: "An
// implementation MUST NOT allow the maximum delay (protocol parameter
// 'SACK.Delay') to be configured to be more than 500 ms" (§6.2).
const RecvMaxSACKDelay = 500 * time.Millisecond

// Defaults and limits of ReceiverConfig.
const (
	// RecvDefaultBufferSize is the receive window when BufferSize is 0, the
	// sctpddp default.
	RecvDefaultBufferSize = 1 << 20
	// RecvDefaultMaxDuplicateTSNs bounds the Duplicate TSNs a SACK
	// reports. "The duplicate TSN number(s) SHOULD be reported in the
	// SACK chunk as duplicate" (§6.2): a SHOULD, and a SACK has room for
	// only so many. Duplicates beyond it are counted but not listed.
	RecvDefaultMaxDuplicateTSNs = 16
	// recvMaxSpan is the farthest beyond the Cumulative TSN Ack a TSN can
	// be and still be reported: Gap Ack Block End is a 16-bit offset.
	recvMaxSpan = 1<<16 - 1
	// recvMaxRanges bounds the default number of out-of-order TSN ranges
	// (8 bytes each); a SACK in the largest MTU reports about 2000.
	recvMaxRanges = 4096
	// recvSWSFloor is the receiver silly window syndrome threshold (RFC
	// 1122 §4.2.3.3, required by RFC 9260 §6.2): free space below
	// min(recvSWSFloor, BufferSize/4) is advertised as a_rwnd 0, so that
	// the sender does not trickle small chunks into a nearly full window.
	recvSWSFloor = 1024
)

// ReceiverConfig configures a Receiver. The zero value of a field selects
// its default; InboundStreams is required.
type ReceiverConfig struct {
	// PeerInitialTSN is the Initial TSN of the peer's INIT or INIT ACK
	// (Established.PeerInitialTSN). "In the case where no DATA chunk has
	// been received, this value [the Cumulative TSN Ack] is set to the
	// peer's Initial TSN minus one" (§3.3.4).
	PeerInitialTSN uint32
	// BufferSize is the receive buffer space the association announced as
	// the a_rwnd of its INIT or INIT ACK (§6.2 rule A;
	// HandshakeConfig.ARwnd), in bytes of user data
	// (RecvDefaultBufferSize if 0). It bounds the bytes the Receiver
	// holds for reassembly and reordering, and with the ULP's Hold, the
	// a_rwnd it advertises.
	BufferSize uint32
	// InitialWindow, if not 0, is the receive buffer space advertised
	// first (the a_rwnd of the INIT or INIT ACK), below BufferSize: the
	// association grows it up to BufferSize (SetWindow).
	InitialWindow uint32
	// InboundStreams is the number of inbound streams: the smaller of the
	// MIS this endpoint announced and the peer's OS (§5.1.1;
	// Established.InboundStreams). DATA on a Stream Identifier at or
	// above it is acknowledged and discarded (RecvInvalidStream).
	InboundStreams uint16
	// SACKDelay is the delayed acknowledgement timeout, SACK.Delay
	// (RecvDefaultSACKDelay if 0, at most RecvMaxSACKDelay).
	SACKDelay time.Duration
	// MaxDuplicateTSNs bounds the Duplicate TSNs one SACK lists
	// (RecvDefaultMaxDuplicateTSNs if 0).
	MaxDuplicateTSNs int
	// MaxGapRanges bounds the runs of TSNs received beyond the Cumulative
	// TSN Ack, each reported as one Gap Ack Block (if 0: BufferSize/2 or
	// 4096, whichever is smaller; each run beyond the first costs the
	// sender a missing TSN of at least one byte of the window). A DATA
	// chunk that would start another run is dropped as one beyond the
	// receive window would be.
	MaxGapRanges int
	// MaxHeldChunks bounds the fragments and out-of-order messages held
	// for reassembly and reordering (if 0: BufferSize/64, at least 64).
	// Their bytes are bounded by BufferSize; this bounds their count, so
	// that tiny chunks cannot make the Receiver keep more bookkeeping
	// than data.
	MaxHeldChunks int
	// MaxHeldPerStream bounds the fragments and messages MaxHeldChunks
	// counts that one stream may hold (if 0: a quarter of
	// MaxHeldChunks, at least 16; at most 65535), so that the DDP
	// streams of one association share the reordering: a stream that
	// loses much cannot keep the others' messages from being held.
	MaxHeldPerStream int
	// MaxMessageSize bounds a reassembled user message (if 0, and at
	// most: BufferSize less the silly window syndrome threshold, so that
	// the window never closes on the last fragment of a message). A
	// message that outgrows it could never be delivered without a partial
	// delivery API (§6.9), which this Receiver does not have: the
	// association is aborted with Out of Resource.
	MaxMessageSize int
}

// RecvMessage is a user message delivered to the ULP. Data is valid only
// until the delivery callback returns: for a message carried in one
// unfragmented DATA chunk it is the chunk's user data in the received
// packet, without a copy; otherwise it is a reassembly buffer the
// Receiver reuses. A ULP that keeps the bytes copies them and, to keep
// the window closed over the copy, calls Hold.
type RecvMessage struct {
	StreamID  uint16 // Stream Identifier
	SSN       SSN    // Stream Sequence Number; meaningless when Unordered
	PPID      uint32 // Payload Protocol Identifier
	Unordered bool   // the U bit
	Data      []byte
}

// RecvResult says what became of a DATA chunk.
type RecvResult uint8

const (
	// RecvNew is a chunk accepted: its TSN is acknowledged from now on.
	RecvNew RecvResult = iota
	// RecvDuplicate is a chunk whose TSN had already arrived; the next
	// SACK lists it among the Duplicate TSNs.
	RecvDuplicate
	// RecvDropped is a chunk not accepted, as one beyond the receive
	// window or the Receiver's bounds; it is not acknowledged and the
	// sender retransmits it.
	RecvDropped
	// RecvInvalidStream is a chunk on a Stream Identifier at or beyond
	// InboundStreams: acknowledged and discarded. The association sends
	// an ERROR with the Invalid Stream Identifier cause (§6.5).
	RecvInvalidStream
)

func (r RecvResult) String() string {
	switch r {
	case RecvNew:
		return "new"
	case RecvDuplicate:
		return "duplicate"
	case RecvDropped:
		return "dropped"
	case RecvInvalidStream:
		return "invalid stream"
	}
	return fmt.Sprintf("RecvResult(%d)", uint8(r))
}

// RecvError is a DATA chunk for which the association sends an ABORT with
// the error cause Cause (No User Data, Protocol Violation or Out of
// Resource). The Receiver is not used after it returns one.
type RecvError struct {
	Cause    chunk.CauseCode
	TSN      uint32
	StreamID uint16
	Reason   string // for Protocol Violation's Additional Information
}

func (e *RecvError) Error() string {
	s := fmt.Sprintf("sctp: DATA TSN %d stream %d: %v", e.TSN, e.StreamID, e.Cause)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// AppendCause appends the error cause the ABORT carries.
func (e *RecvError) AppendCause(b []byte) []byte {
	switch e.Cause {
	case chunk.CauseNoUserData:
		return chunk.NoUserData{TSN: e.TSN}.Append(b)
	case chunk.CauseProtocolViolation:
		return chunk.RawCause{Code: e.Cause, Info: []byte(e.Reason)}.Append(b)
	}
	return chunk.RawCause{Code: e.Cause}.Append(b)
}

// Is lets errors.Is match a RecvError by cause: errors.Is(err,
// &RecvError{Cause: chunk.CauseNoUserData}).
func (e *RecvError) Is(target error) bool {
	t, ok := target.(*RecvError)
	return ok && t.Cause == e.Cause
}

// RecvStats counts what the Receiver did with the DATA chunks it was
// given.
type RecvStats struct {
	Chunks        uint64 // DATA chunks given to Data
	Duplicates    uint64 // RecvDuplicate
	Dropped       uint64 // RecvDropped
	InvalidStream uint64 // RecvInvalidStream
	Messages      uint64 // user messages delivered
	ZeroCopy      uint64 // of those, delivered from the packet without a copy
	SACKs         uint64 // SACK chunks built
}

// recvRange is a run of consecutive TSNs received beyond the Cumulative TSN
// Ack: one Gap Ack Block.
type recvRange struct{ first, last TSN }

// Receiver is the receive side of an association (RFC 9260 §6.2, §6.5
// to §6.7, §6.9): which TSNs have arrived, what the next SACK says and
// when it is due, the receiver window, and the reassembly and ordered
// delivery of user messages (reassembly.go). A Receiver is pure state: it starts no
// goroutines, reads no clock and sends nothing. The association's run loop
// owns it and drives it:
//
//	for each received packet, after the control chunks:
//		for each DATA chunk d (chunk.ParseData; pass d on ErrNoUserData too):
//			res, err := r.Data(d)
//			err != nil:             ABORT with err's cause (RecvError.AppendCause)
//			res == RecvInvalidStream: bundle an ERROR with chunk.InvalidStreamIdentifier
//		r.EndPacket(now)
//	sendNow, deadline := r.SACKWhen(now)
//	sendNow:           b = r.AppendSACK(b, room), bundled before any DATA
//	!deadline.IsZero(): arm the delayed-ack timer for deadline, call SACKWhen when it fires
//	after the ULP consumes data it held (Release): call SACKWhen for a window update
//
// DATA chunks are accepted only in ESTABLISHED, SHUTDOWN-PENDING and
// SHUTDOWN-SENT ("DATA chunks MUST only be received according to the
// rules below in ESTABLISHED, SHUTDOWN-PENDING, and SHUTDOWN-SENT states",
// §6): the association does not call Data in other states. In
// SHUTDOWN-SENT it "MUST immediately respond to each received packet
// containing one or more DATA chunks with a SHUTDOWN chunk" carrying
// CumulativeTSN, and with a SACK as well when GapsOrDuplicates (§9.2).
//
// FORWARD TSN (RFC 3758) and I-DATA (RFC 8260) are not negotiated: the
// association announces neither Forward-TSN-Supported nor I-DATA support
// in its INIT, and the Receiver never sees them. A FORWARD TSN from the
// peer is then a chunk type the association does not support, handled by
// the upper bits of its type (RFC 9260 §3.2, chunk.Type.Unrecognized):
// 0xC0 is "Skip this chunk and continue processing, but report it in an
// ERROR chunk using the 'Unrecognized Chunk Type' error cause". A peer
// that abandons a TSN that way has it never acknowledged and fails the
// association by its own retransmission limit. An I-DATA is a protocol
// violation: "The same applies if I-DATA support has not been negotiated
// for an association and an I-DATA chunk is received" ("the receiver ...
// MUST abort the association by sending an ABORT chunk. The ABORT chunk
// MAY include the 'Protocol Violation' error cause", RFC 8260 §2.2).
//
// Choices where the RFC leaves room, and deviations:
//
//   - Every bound a peer can push against (TSNs beyond the Cumulative TSN
//     Ack, runs of them, fragments and messages held, bytes held) drops
//     the DATA chunk as one beyond the window is dropped: not
//     acknowledged, answered by a SACK at once, retransmitted by the
//     sender. The chunk right after the Cumulative TSN Ack always finds
//     room for its TSN and, when it is held, one entry more, so that an
//     honest sender always makes progress.
//   - The Receiver does not renege. Where §6.2 says that with a window of
//     0 the receiver "SHOULD drop the largest TSN held for reordering and
//     accept the new incoming DATA chunk", it accepts a chunk below the
//     highest TSN without dropping any, up to a quarter of the buffer
//     beyond it, and drops the chunk beyond that.
//   - There is no partial delivery API (§6.9): a message larger than
//     MaxMessageSize ends the association with Out of Resource.
//   - Every packet with a duplicate TSN is acknowledged at once, with new
//     DATA or without (the first MUST, the second MAY of §6.2), and so is
//     every packet that fills a gap.
//   - Free space below the silly window syndrome threshold is advertised
//     as 0 and is then a window of 0 for the rule that drops new DATA
//     beyond the highest TSN.
//   - An ordered message whose SSN was already delivered, or that shares
//     its SSN with another message held, is a Protocol Violation: RFC 9260
//     has the sender number messages one by one (§6.5) and says nothing of
//     a receiver that sees otherwise.
//
// A Receiver is not safe for concurrent use: the association's run loop
// owns it.
type Receiver struct {
	cfg     ReceiverConfig
	deliver func(RecvMessage)

	// cum is the Cumulative TSN Ack: "the largest TSN, such that all TSNs
	// smaller than or equal to it have been received" (§3.3.4).
	cum TSN
	// ranges are the TSNs received beyond cum, in increasing order,
	// isolated: each range's first is at least 2 beyond the previous
	// range's last (or cum). Bounded by maxRanges; every TSN in them is
	// within maxSpan of cum.
	ranges    []recvRange
	maxRanges int
	maxSpan   uint32

	// dups are the Duplicate TSNs since the last SACK, at most
	// MaxDuplicateTSNs.
	dups []uint32

	// Bytes of user data held: heldBytes by the reassembly and reordering
	// queues, ulpHeld by the ULP (Hold, Release).
	heldBytes uint64
	ulpHeld   uint64
	hardCap   uint64 // heldBytes + ulpHeld never exceed it
	window    uint64 // the receive buffer space advertised, at most BufferSize (SetWindow)
	swsMin    uint32
	// lastARwnd is the a_rwnd of the last SACK (BufferSize, the INIT's,
	// before the first).
	lastARwnd uint32

	// The SACK timing state: unacked is set when DATA arrived since the
	// last SACK, firstUnacked when the first of it arrived, packets counts
	// the packets with DATA since the last SACK, and ackNow says an
	// immediate SACK is due.
	unacked      bool
	firstUnacked time.Time
	packets      int
	ackNow       bool
	// The current packet's state: gapAtStart says a gap existed before its
	// first DATA chunk.
	inPacket     bool
	gapAtStart   bool
	pktData      bool
	pktNew       bool
	pktDup       bool
	pktDropped   bool
	pktImmediate bool
	sackGaps     chunk.GapAckBlocks
	sackDups     chunk.TSNList
	stats        RecvStats
	reasm        reasmState
}

// NewReceiver returns a Receiver that hands each complete user message to
// deliver, in order per stream for ordered messages and at once for
// unordered ones. deliver runs inside Data; it may call Hold but not Data.
func NewReceiver(cfg ReceiverConfig, deliver func(RecvMessage)) (*Receiver, error) {
	if cfg.InboundStreams == 0 {
		return nil, errors.New("sctp: ReceiverConfig.InboundStreams is 0")
	}
	if deliver == nil {
		return nil, errors.New("sctp: NewReceiver: nil deliver")
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = RecvDefaultBufferSize
	}
	if cfg.SACKDelay == 0 {
		cfg.SACKDelay = RecvDefaultSACKDelay
	}
	if cfg.SACKDelay < 0 || cfg.SACKDelay > RecvMaxSACKDelay {
		return nil, fmt.Errorf("sctp: ReceiverConfig.SACKDelay %v outside (0, %v]", cfg.SACKDelay, RecvMaxSACKDelay)
	}
	if cfg.MaxDuplicateTSNs <= 0 {
		cfg.MaxDuplicateTSNs = RecvDefaultMaxDuplicateTSNs
	}
	if cfg.MaxGapRanges <= 0 {
		cfg.MaxGapRanges = int(min(uint64(cfg.BufferSize)/2, recvMaxRanges))
		cfg.MaxGapRanges = max(cfg.MaxGapRanges, 1)
	}
	if cfg.MaxHeldChunks <= 0 {
		cfg.MaxHeldChunks = max(int(cfg.BufferSize/64), 64)
	}
	if cfg.MaxHeldPerStream <= 0 {
		cfg.MaxHeldPerStream = max(cfg.MaxHeldChunks/4, 16)
	}
	// One more than the bound, for the chunk after the Cumulative TSN
	// Ack, fits a uint16.
	cfg.MaxHeldPerStream = min(cfg.MaxHeldPerStream, 1<<16-2)
	swsMin := min(recvSWSFloor, cfg.BufferSize/4)
	if maxMsg := min(uint64(cfg.BufferSize-swsMin), uint64(^uint(0)>>1)); cfg.MaxMessageSize <= 0 || uint64(cfg.MaxMessageSize) > maxMsg {
		cfg.MaxMessageSize = int(maxMsg)
	}
	r := &Receiver{
		cfg:       cfg,
		deliver:   deliver,
		cum:       TSN(cfg.PeerInitialTSN - 1),
		maxRanges: cfg.MaxGapRanges,
		// Each TSN beyond cum the sender may have outstanding carries at
		// least one byte of the window, and a Gap Ack Block can reach
		// no farther than 2^16 - 1.
		maxSpan: min(cfg.BufferSize, recvMaxSpan),
		// The window may be overrun by DATA that fills a gap below the
		// highest TSN, which §6.2 has the receiver accept: by a quarter
		// of the buffer at most.
		hardCap:   uint64(cfg.BufferSize) + uint64(cfg.BufferSize)/4,
		swsMin:    swsMin,
		window:    uint64(cfg.BufferSize),
		lastARwnd: cfg.BufferSize,
		ranges:    make([]recvRange, 0, min(cfg.MaxGapRanges, 64)),
		dups:      make([]uint32, 0, cfg.MaxDuplicateTSNs),
	}
	if cfg.InitialWindow > 0 {
		r.SetWindow(cfg.InitialWindow)
		r.lastARwnd = uint32(r.window)
	}
	r.reasm.init(&r.cfg)
	return r, nil
}

// CumulativeTSN returns the Cumulative TSN Ack, for a SACK or a SHUTDOWN
// (§9.2).
func (r *Receiver) CumulativeTSN() uint32 { return uint32(r.cum) }

// HighestTSN returns the largest TSN received: the Cumulative TSN Ack when
// no TSN beyond it has arrived.
func (r *Receiver) HighestTSN() TSN {
	if len(r.ranges) == 0 {
		return r.cum
	}
	return r.ranges[len(r.ranges)-1].last
}

// GapsOrDuplicates reports whether the next SACK has Gap Ack Blocks or
// Duplicate TSNs to report, which a SHUTDOWN cannot carry (§9.2).
func (r *Receiver) GapsOrDuplicates() bool { return len(r.ranges) > 0 || len(r.dups) > 0 }

// Stats returns the Receiver's counters.
func (r *Receiver) Stats() RecvStats { return r.stats }

// Held returns the bytes of user data held for reassembly and reordering.
func (r *Receiver) Held() int { return int(r.heldBytes) }

// free returns the receive buffer space not held by the Receiver or the
// ULP.
func (r *Receiver) free() uint64 {
	used := r.heldBytes + r.ulpHeld
	if used >= r.window {
		return 0
	}
	return r.window - used
}

// SetWindow sets the receive buffer space that a_rwnd is computed from,
// at most BufferSize (and at least the silly window syndrome threshold):
// the association grows it with the path's bandwidth-delay product and
// shrinks it back when the peer has been idle. DATA within BufferSize is
// still accepted when the window shrinks below what the peer has in
// flight.
func (r *Receiver) SetWindow(w uint32) {
	r.window = uint64(max(min(w, r.cfg.BufferSize), 2*r.swsMin))
}

// Window returns the receive buffer space a_rwnd is computed from.
func (r *Receiver) Window() uint32 { return uint32(r.window) }

// ARwnd returns the a_rwnd the next SACK advertises: the receive buffer
// space less what is held for reassembly, reordering and by the ULP (§6.2
// rules B and C), or 0 when that is below the silly window syndrome
// threshold.
func (r *Receiver) ARwnd() uint32 {
	f := r.free()
	if f < uint64(r.swsMin) {
		return 0
	}
	return uint32(f)
}

// Hold tells the Receiver that the ULP keeps n bytes of delivered data,
// which then count against the window until Release. It is called from
// the delivery callback, for a ULP that queues messages rather than
// consuming them at once (§6.2 rule C: a_rwnd opens "as DATA chunks are
// delivered to the ULP and released from the receive buffers").
func (r *Receiver) Hold(n int) {
	if n > 0 {
		r.ulpHeld += uint64(n)
	}
}

// Release gives back n bytes the ULP held. The association then calls
// SACKWhen: a window that opens far enough is due a window update.
func (r *Receiver) Release(n int) {
	if n <= 0 {
		return
	}
	r.ulpHeld -= min(uint64(n), r.ulpHeld)
}

// offset returns how far t lies beyond the Cumulative TSN Ack, modulo
// 2^32.
func (r *Receiver) offset(t TSN) uint32 { return uint32(t - r.cum) }

// recvLocate returns the index of the first range whose last TSN is at or
// beyond offset off from cum.
func (r *Receiver) recvLocate(off uint32) int {
	lo, hi := 0, len(r.ranges)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.offset(r.ranges[m].last) < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// recvClassify says whether TSN t (within maxSpan beyond cum) is a
// duplicate and, if not, whether marking it would start a new range.
func (r *Receiver) recvClassify(t TSN) (dup, newRange bool) {
	off := r.offset(t)
	if off == 1 {
		return false, false
	}
	i := r.recvLocate(off)
	if i < len(r.ranges) && r.offset(r.ranges[i].first) <= off {
		return true, false
	}
	joinPrev := i > 0 && r.offset(r.ranges[i-1].last)+1 == off
	joinNext := i < len(r.ranges) && r.offset(r.ranges[i].first) == off+1
	return false, !joinPrev && !joinNext
}

// recvMark records TSN t as received; recvClassify said it is new and
// the caller has room for a new range if it needs one.
func (r *Receiver) recvMark(t TSN) {
	off := r.offset(t)
	if off == 1 {
		r.cum = t
		if len(r.ranges) > 0 && r.ranges[0].first == t.Next() {
			r.cum = r.ranges[0].last
			r.ranges = append(r.ranges[:0], r.ranges[1:]...)
		}
		return
	}
	i := r.recvLocate(off)
	joinPrev := i > 0 && r.offset(r.ranges[i-1].last)+1 == off
	joinNext := i < len(r.ranges) && r.offset(r.ranges[i].first) == off+1
	switch {
	case joinPrev && joinNext:
		r.ranges[i-1].last = r.ranges[i].last
		r.ranges = append(r.ranges[:i], r.ranges[i+1:]...)
	case joinPrev:
		r.ranges[i-1].last = t
	case joinNext:
		r.ranges[i].first = t
	default:
		r.ranges = append(r.ranges, recvRange{})
		copy(r.ranges[i+1:], r.ranges[i:])
		r.ranges[i] = recvRange{t, t}
	}
}

// recvStartPacket notes the state before a packet's first DATA chunk.
func (r *Receiver) recvStartPacket() {
	if r.inPacket {
		return
	}
	r.inPacket = true
	r.gapAtStart = len(r.ranges) > 0
}

// Data processes one DATA chunk of the packet being received, as returned
// by chunk.ParseData (a chunk with no user data, which ParseData returns
// with ErrNoUserData, included). Complete user messages are delivered
// before Data returns; d.UserData need not outlive the call. A non-nil
// error is a *RecvError: the association sends an ABORT with its cause.
func (r *Receiver) Data(d chunk.Data) (RecvResult, error) {
	r.recvStartPacket()
	r.pktData = true
	r.stats.Chunks++
	t := TSN(d.TSN)
	if d.Flags&chunk.FlagImmediate != 0 {
		// "Upon receipt of an SCTP packet containing a DATA chunk with the
		// I bit set, the receiver SHOULD NOT delay the sending of the
		// corresponding SACK chunk" (§6.2).
		r.pktImmediate = true
	}
	if len(d.UserData) == 0 {
		// "If an endpoint receives a DATA chunk with no user data (i.e.,
		// the Length field is set to 16), it SHOULD send an ABORT chunk
		// with a "No User Data" error cause" (§6.2).
		return RecvDropped, &RecvError{Cause: chunk.CauseNoUserData, TSN: d.TSN, StreamID: d.StreamID}
	}
	off := r.offset(t)
	if off == 0 || off >= 1<<31 {
		// At or before the Cumulative TSN Ack.
		return r.recvDuplicate(t), nil
	}
	if off > r.maxSpan {
		return r.recvDrop(), nil
	}
	dup, newRange := r.recvClassify(t)
	if dup {
		return r.recvDuplicate(t), nil
	}
	if newRange && len(r.ranges) >= r.maxRanges {
		return r.recvDrop(), nil
	}
	beyond := t.After(r.HighestTSN())
	if beyond && r.ARwnd() == 0 {
		// "When the receiver's advertised window is 0, the receiver MUST
		// drop any new incoming DATA chunk with a TSN larger than the
		// largest TSN received so far" (§6.2).
		return r.recvDrop(), nil
	}
	if d.StreamID >= r.cfg.InboundStreams {
		// "If an endpoint receives a DATA chunk with an invalid stream
		// identifier, it SHOULD acknowledge the reception of the DATA
		// chunk following the normal procedure, immediately send an ERROR
		// chunk with cause set to "Invalid Stream Identifier" (see
		// Section 3.3.10), and discard the DATA chunk" (§6.5).
		r.recvMark(t)
		r.pktNew = true
		r.stats.InvalidStream++
		return RecvInvalidStream, nil
	}
	hold, newEntry, err := r.reasmPlan(d)
	if err != nil {
		return RecvDropped, err
	}
	if hold > 0 {
		switch {
		case newEntry && (r.reasm.entries() >= r.cfg.MaxHeldChunks+recvCumSlack(off) ||
			int(r.reasm.perStream[d.StreamID]) >= r.cfg.MaxHeldPerStream+recvCumSlack(off)):
			// The chunk right after the Cumulative TSN Ack may go one
			// beyond the bounds: were it dropped while every entry held
			// waits for the TSNs before it, nothing could move.
			return r.recvDrop(), nil
		case beyond && uint64(hold) > uint64(r.ARwnd()):
			// Beyond the receive window: "The SCTP endpoint MUST always
			// acknowledge the reception of each valid DATA chunk when
			// the DATA chunk received is inside its receive window"
			// (§6.2), and only then.
			return r.recvDrop(), nil
		case !beyond && r.heldBytes+r.ulpHeld+uint64(hold) > r.hardCap:
			// A chunk filling a gap is accepted beyond the window ("if
			// the new incoming DATA chunk holds a TSN value less than the
			// largest TSN received so far, then the receiver SHOULD drop
			// the largest TSN held for reordering and accept the new
			// incoming DATA chunk"), up to hardCap: this Receiver does
			// not renege on data it has acknowledged.
			return r.recvDrop(), nil
		}
	}
	r.recvMark(t)
	r.pktNew = true
	if err := r.reasmAdd(d); err != nil {
		return RecvNew, err
	}
	return RecvNew, nil
}

// recvCumSlack returns 1 for the TSN right after the Cumulative TSN Ack
// (offset 1), 0 for any other.
func recvCumSlack(off uint32) int {
	if off == 1 {
		return 1
	}
	return 0
}

// recvDuplicate counts a duplicate TSN for the next SACK: "Every time a
// receiver gets a duplicate TSN (before sending the SACK chunk), it adds
// it to the list of duplicates" (§3.3.4).
func (r *Receiver) recvDuplicate(t TSN) RecvResult {
	r.pktDup = true
	r.stats.Duplicates++
	if len(r.dups) < r.cfg.MaxDuplicateTSNs {
		r.dups = append(r.dups, uint32(t))
	}
	return RecvDuplicate
}

// recvDrop drops a chunk: "if such a DATA chunk is dropped, the receiver
// MUST immediately send back a SACK chunk with the current receive window
// showing only DATA chunks received and accepted so far" (§6.2).
func (r *Receiver) recvDrop() RecvResult {
	r.pktDropped = true
	r.stats.Dropped++
	return RecvDropped
}

// EndPacket ends the packet whose DATA chunks were given to Data and
// decides whether its acknowledgement can wait. now is the packet's
// arrival time. It does nothing for a packet without DATA.
func (r *Receiver) EndPacket(now time.Time) {
	if !r.inPacket {
		return
	}
	r.inPacket = false
	if !r.pktData {
		return
	}
	gapNow := len(r.ranges) > 0
	switch {
	case r.pktDropped:
		// §6.2: a dropped chunk is answered at once (recvDrop).
		r.ackNow = true
	case r.pktDup:
		// "When a packet arrives with duplicate DATA chunk(s) and with no
		// new DATA chunk(s), the endpoint MUST immediately send a SACK
		// chunk with no delay. If a packet arrives with duplicate DATA
		// chunk(s) bundled with new DATA chunks, the endpoint MAY
		// immediately send a SACK chunk" (§6.2): it does, both.
		r.ackNow = true
	case r.pktNew && (gapNow || r.gapAtStart):
		// "If the endpoint detects a gap in the received DATA chunk
		// sequence, it SHOULD send a SACK chunk with Gap Ack Blocks
		// immediately. The data receiver continues sending a SACK chunk
		// after receipt of each SCTP packet that does not fill the gap"
		// (§6.7); a packet that fills it is acknowledged at once as well,
		// as RFC 5681 §4.2 (whose delayed acknowledgement §6.2 follows)
		// has TCP acknowledge a segment that fills in a gap.
		r.ackNow = true
	case r.pktImmediate:
		r.ackNow = true
	}
	if !r.unacked {
		r.unacked = true
		r.firstUnacked = now
	}
	r.packets++
	if r.packets >= 2 {
		// "an acknowledgement SHOULD be generated for at least every
		// second packet (not every second DATA chunk) received" (§6.2).
		r.ackNow = true
	}
	r.pktData, r.pktNew, r.pktDup, r.pktDropped, r.pktImmediate = false, false, false, false, false
}

// SACKPending reports whether DATA has arrived that no SACK has
// acknowledged yet. Before sending DATA "if any received DATA chunks have
// not been acknowledged (e.g., due to delayed ack), the sender SHOULD
// create a SACK chunk and bundle it with the outbound DATA chunk" (§6.1).
func (r *Receiver) SACKPending() bool { return r.unacked || r.ackNow }

// SACKWhen decides when the next SACK is sent. sendNow says it is due at
// now: the association builds it with AppendSACK. Otherwise a non-zero
// deadline is when the delayed acknowledgement falls due ("SHOULD be
// generated within 200 ms of the arrival of any unacknowledged DATA
// chunk", here SACKDelay): the association arms its timer for it and
// calls SACKWhen again when it fires. Neither means no SACK is owed.
//
// A window update is due when the a_rwnd the last SACK advertised was 0
// and the window has opened, or when it has grown by a quarter of the
// buffer: "When the window opens up, an SCTP receiver SHOULD send
// additional SACK chunks to update the window even if no new data is
// received. The receiver MUST avoid sending a large number of window
// updates ... One way to achieve this is to send a window update only if
// the window can be increased by at least a quarter of the receive buffer
// size of the association" (§6.2).
func (r *Receiver) SACKWhen(now time.Time) (sendNow bool, deadline time.Time) {
	return recvSACKWhen(recvAckState{
		ackNow:       r.ackNow,
		unacked:      r.unacked,
		firstUnacked: r.firstUnacked,
		delay:        r.cfg.SACKDelay,
		lastARwnd:    r.lastARwnd,
		aRwnd:        r.ARwnd(),
		bufferSize:   r.cfg.BufferSize,
	}, now)
}

// recvAckState is what the SACK timing decision depends on.
type recvAckState struct {
	ackNow       bool
	unacked      bool
	firstUnacked time.Time
	delay        time.Duration
	lastARwnd    uint32
	aRwnd        uint32
	bufferSize   uint32
}

// recvSACKWhen is SACKWhen's decision as a pure function of the state.
func recvSACKWhen(s recvAckState, now time.Time) (sendNow bool, deadline time.Time) {
	if s.ackNow {
		return true, time.Time{}
	}
	if s.aRwnd > s.lastARwnd && (s.lastARwnd == 0 || s.aRwnd-s.lastARwnd >= s.bufferSize/4) {
		return true, time.Time{}
	}
	if !s.unacked {
		return false, time.Time{}
	}
	deadline = s.firstUnacked.Add(s.delay)
	if !now.Before(deadline) {
		return true, time.Time{}
	}
	return false, deadline
}

// recvSACKFixedLen is the length of a SACK chunk without Gap Ack Blocks
// and Duplicate TSNs.
const recvSACKFixedLen = 16

// AppendSACK appends the SACK that acknowledges what has arrived to b and
// returns it; it does not allocate once its scratch lists have grown.
// room is the bytes the chunk may take (the path MTU less the common
// header and the chunks bundled with it), at least 16: Gap Ack Blocks are
// reported from the lowest TSNs up as far as room allows ("This single
// SACK chunk MUST report the Gap Ack Blocks from the lowest to highest
// TSNs, within the size limit set by the PMTU, and leave the remaining
// highest TSN numbers unacknowledged", §6.7), then Duplicate TSNs in what
// is left. The SACK resets the delayed acknowledgement state and the
// duplicate list: "The duplicate count is reinitialized to zero after
// sending each SACK chunk" (§3.3.4).
func (r *Receiver) AppendSACK(b []byte, room int) []byte {
	n := max(room-recvSACKFixedLen, 0) / 4
	gaps := r.sackGaps[:0]
	for _, rg := range r.ranges[:min(len(r.ranges), n)] {
		// Offsets fit 16 bits: every range lies within maxSpan of cum.
		gaps = gaps.AppendBlock(uint16(r.offset(rg.first)), uint16(r.offset(rg.last)))
	}
	n -= gaps.Len()
	dups := r.sackDups[:0]
	for _, t := range r.dups[:min(len(r.dups), n)] {
		dups = dups.AppendTSN(t)
	}
	r.sackGaps, r.sackDups = gaps, dups
	a := r.ARwnd()
	b = chunk.SACK{CumulativeTSNAck: uint32(r.cum), ARwnd: a, GapAckBlocks: gaps, DuplicateTSNs: dups}.Append(b)
	r.lastARwnd = a
	r.dups = r.dups[:0]
	r.unacked, r.ackNow, r.packets = false, false, 0
	r.firstUnacked = time.Time{}
	r.stats.SACKs++
	return b
}
