package ddp

import (
	"errors"
	"fmt"
	"math"

	"github.com/iwarpgo/iwarp/trace"
)

// LLP is the send half of the contract between DDP and a lower layer
// protocol (MPA/TCP, SCTP, a data channel, a test pipe): what every LLP
// does. One goroutine at a time sends on it (RDMAP's send route). An LLP
// may also be a NowWriter or a Poller (llp.go).
type LLP interface {
	// MULPDU is the largest DDP segment (header and payload) that the LLP
	// carries in one unit: RFC 5041 §5.2's "MULPDU value Advertised by the
	// LLP". It may change between messages but not during one.
	MULPDU() int

	// WriteSegment sends one DDP segment: hdr followed by the payload
	// slices. The slices point into registered memory; the LLP must not
	// modify them. It may keep the payload slices (not hdr, nor the list
	// that holds the slices: the Sender reuses both) to write them with
	// later segments, until Flush: their memory does not change before
	// then.
	// It may wait for the network.
	WriteSegment(hdr []byte, payload [][]byte) error

	// Flush writes every segment WriteSegment kept. When it returns nil
	// the LLP has taken responsibility for delivering them reliably, and
	// keeps no reference to their memory: a message then counts as
	// completed at the DDP layer (RFC 5040 §5.5 rule 14). An error is the
	// LLP stream's loss.
	Flush() error
}

// ErrMessageTooLong is returned for an outbound message of 2^32 octets or
// more: "The ULP Message Length MUST be less than 2^32." (RFC 5041 §5.2)
var ErrMessageTooLong = errors.New("ddp: ULP message length must be less than 2^32 octets")

// ErrTOWrap is returned for an outbound tagged message whose last octet's
// Tagged Offset would not fit in 64 bits.
var ErrTOWrap = errors.New("ddp: tagged offset plus message length wraps past 2^64")

// Sender is the Data Source side of one DDP stream: it cuts ULP messages
// into segments of at most the LLP's MULPDU and hands them to the LLP, in
// the order they were submitted (RFC 5041 §5.3). It assigns the MSN of
// every untagged message per queue, starting at one (RFC 5041 §4.3).
//
// A Sender is not safe for concurrent use: the ULP serialises its sends
// (RDMAP does so per stream).
type Sender struct {
	llp    LLP
	obs    trace.Observer
	stream uint32
	now    NowWriter // llp, if it is one
	msn    []uint32  // next MSN per queue number
	seq    uint32    // segments sent: the sequence number of the next one

	hdr    [MaxHeaderLen]byte
	pieces [][]byte // reused per segment: no allocation in steady state
}

// NewSender returns a Sender over llp for a stream with the given number
// of untagged queues (RDMAP uses four: QN 0, 1 and 2 of RFC 5040 and QN 3 of RFC 7306). obs may be nil.
func NewSender(llp LLP, queues int, stream uint32, obs trace.Observer) *Sender {
	s := &Sender{llp: llp, obs: obs, stream: stream, msn: make([]uint32, queues), pieces: make([][]byte, 0, 8)}
	s.now, _ = llp.(NowWriter)
	for i := range s.msn {
		s.msn[i] = 1 // "The initial value for MSN MUST be one." (RFC 5041 §4.3)
	}
	return s
}

// SendTagged sends one tagged DDP message: the payload gathered from sgl
// is placed at the peer's stag starting at Tagged Offset to. rsvdULP is
// carried in every segment (RDMAP's control byte).
func (s *Sender) SendTagged(rsvdULP byte, stag uint32, to uint64, sgl [][]byte) error {
	n, err := sglLen(sgl)
	if err != nil {
		return err
	}
	if n > 0 && to > math.MaxUint64-uint64(n-1) {
		return ErrTOWrap
	}
	h := Header{Tagged: true, DV: Version, STag: stag, TO: to}
	h.RsvdULP[0] = rsvdULP
	return s.send(&h, sgl, n)
}

// SendUntagged sends one untagged DDP message on queue qn and returns the
// MSN it was given. rsvdULP is carried in every segment (RDMAP's control
// byte and Invalidate STag).
func (s *Sender) SendUntagged(rsvdULP [5]byte, qn uint32, sgl [][]byte) (uint32, error) {
	if int(qn) >= len(s.msn) {
		return 0, fmt.Errorf("ddp: queue number %d is not one of this stream's %d queues", qn, len(s.msn))
	}
	n, err := sglLen(sgl)
	if err != nil {
		return 0, err
	}
	msn := s.msn[qn]
	h := Header{DV: Version, RsvdULP: rsvdULP, QN: qn, MSN: msn}
	if err := s.send(&h, sgl, n); err != nil {
		return 0, err
	}
	// "MUST be increased by one (modulo 2^32) with each DDP Message
	// targeting the specific Queue Number" (RFC 5041 §4.3).
	s.msn[qn] = msn + 1
	return msn, nil
}

// SendTaggedNow sends a tagged message of one segment with the LLP's
// WriteNow, and reports whether it did: false (a message longer than one
// segment, an LLP that is no NowWriter or cannot take it at once) means
// nothing was sent.
func (s *Sender) SendTaggedNow(rsvdULP byte, stag uint32, to uint64, sgl [][]byte) (bool, error) {
	n, err := sglLen(sgl)
	if err != nil {
		return false, err
	}
	if n > 0 && to > math.MaxUint64-uint64(n-1) {
		return false, ErrTOWrap
	}
	h := Header{Tagged: true, DV: Version, STag: stag, TO: to}
	h.RsvdULP[0] = rsvdULP
	return s.sendNow(&h, sgl, n)
}

// SendUntaggedNow sends an untagged message of one segment on queue qn
// with the LLP's WriteNow, and reports whether it did; false means
// nothing was sent and no MSN was used.
func (s *Sender) SendUntaggedNow(rsvdULP [5]byte, qn uint32, sgl [][]byte) (bool, error) {
	if int(qn) >= len(s.msn) {
		return false, fmt.Errorf("ddp: queue number %d is not one of this stream's %d queues", qn, len(s.msn))
	}
	n, err := sglLen(sgl)
	if err != nil {
		return false, err
	}
	h := Header{DV: Version, RsvdULP: rsvdULP, QN: qn, MSN: s.msn[qn]}
	ok, err := s.sendNow(&h, sgl, n)
	if ok {
		s.msn[qn]++ // RFC 5041 §4.3, as in SendUntagged
	}
	return ok, err
}

// sendNow hands a message of one segment to the LLP's WriteNow.
func (s *Sender) sendNow(h *Header, sgl [][]byte, n uint64) (bool, error) {
	if s.now == nil || n > uint64(s.llp.MULPDU()-h.Len()) {
		return false, nil
	}
	h.Last = true
	hdr := h.Append(s.hdr[:0])
	s.pieces = append(s.pieces[:0], sgl...)
	ok, err := s.now.WriteNow(hdr, s.pieces)
	clear(s.pieces)
	if !ok || err != nil {
		return false, err
	}
	if s.obs != nil {
		s.obs.Observe(segmentEvent(trace.SegmentSent, s.stream, s.seq, h, uint32(n)))
	}
	s.seq++
	return true, nil
}

func sglLen(sgl [][]byte) (uint64, error) {
	var n uint64
	for _, b := range sgl {
		n += uint64(len(b))
	}
	if n > math.MaxUint32 {
		return 0, ErrMessageTooLong
	}
	return n, nil
}

// send segments a message of n octets. h carries the first segment's
// fields; TO or MO advances by each payload. "A zero-length DDP Message is
// allowed and MUST consume exactly one DDP Segment." (RFC 5041 §5.2)
func (s *Sender) send(h *Header, sgl [][]byte, n uint64) error {
	mulpdu := s.llp.MULPDU()
	max := mulpdu - h.Len()
	if max <= 0 {
		return fmt.Errorf("ddp: LLP's MULPDU of %d octets leaves no room for payload after a %d-octet DDP header", mulpdu, h.Len())
	}
	var (
		sent    uint64
		si, off int // position in sgl
	)
	for {
		want := n - sent
		if want > uint64(max) {
			want = uint64(max)
		}
		s.pieces = s.pieces[:0]
		for got := 0; uint64(got) < want; {
			b := sgl[si][off:]
			if len(b) == 0 {
				si, off = si+1, 0
				continue
			}
			if r := int(want) - got; len(b) > r {
				b = b[:r]
			}
			s.pieces = append(s.pieces, b)
			got += len(b)
			off += len(b)
		}
		sent += want
		// "It MUST be set to one on the last DDP Segment of every DDP
		// Message. It MUST NOT be set to one on any other DDP Segment."
		// (RFC 5041 §4.1)
		h.Last = sent == n
		hdr := h.Append(s.hdr[:0])
		// Observed before the LLP has the segment, so that an observer
		// sees a Request sent before the Response it draws, which the
		// reader may deliver while this call is still in WriteSegment.
		if s.obs != nil {
			s.obs.Observe(segmentEvent(trace.SegmentSent, s.stream, s.seq, h, uint32(want)))
		}
		if err := s.llp.WriteSegment(hdr, s.pieces); err != nil {
			return err
		}
		s.seq++
		if h.Last {
			return nil
		}
		if h.Tagged {
			h.TO += want
		} else {
			h.MO += uint32(want)
		}
	}
}

func segmentEvent(k trace.Kind, stream, seq uint32, h *Header, n uint32) trace.Event {
	return trace.Event{
		Kind: k, Stream: stream, Seq: seq,
		Tagged: h.Tagged, Last: h.Last, Opcode: h.RsvdULP[0] & 0x0f,
		STag: h.STag, TO: h.TO, QN: h.QN, MSN: h.MSN, MO: h.MO, Len: n,
	}
}
