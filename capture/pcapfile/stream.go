package pcapfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"time"
)

// Flow is one direction of a TCP connection.
type Flow struct {
	Src, Dst netip.AddrPort
}

// Reverse returns the other direction.
func (f Flow) Reverse() Flow { return Flow{Src: f.Dst, Dst: f.Src} }

func (f Flow) String() string { return f.Src.String() + " > " + f.Dst.String() }

// Stream is the reassembled byte stream of one direction of a TCP
// connection.
type Stream struct {
	Flow Flow
	// SYN is true when the capture holds this direction's SYN; ISN is
	// then its sequence number and Data starts at ISN+1. Otherwise Data
	// starts at the lowest sequence number captured.
	SYN bool
	ISN uint32
	// FIN and RST report whether this direction sent them.
	FIN, RST bool
	// Data is the stream's octets, in order, up to the first gap.
	Data []byte
	// Chunks says when each part of Data arrived: Chunks[i] covers Data
	// from its Offset to the next Chunk's Offset.
	Chunks []Chunk
	// Err is a *GapError when octets are missing (Data stops before
	// them), or an *OverlapError when a retransmission disagreed with
	// the octets first captured.
	Err error
}

// Chunk marks where new octets of a stream begin.
type Chunk struct {
	Offset int
	Time   time.Time // when the segment that brought them was captured
	// InOrder is when every octet of the stream up to this chunk's end
	// had been captured: the latest Time of this chunk and those before
	// it. Behind a hole, octets captured early wait for the
	// retransmission that fills it.
	InOrder time.Time
}

// TimeAt returns when the octet at offset off of Data was captured.
func (s *Stream) TimeAt(off int) time.Time {
	i := sort.Search(len(s.Chunks), func(i int) bool { return s.Chunks[i].Offset > off })
	if i == 0 {
		return time.Time{}
	}
	return s.Chunks[i-1].Time
}

// InOrderAt returns when the octets of Data up to and including the one
// at off had all been captured (Chunk.InOrder): the moment a TCP
// receiver at the capture point can hand that octet to its application,
// which reads the stream in order.
func (s *Stream) InOrderAt(off int) time.Time {
	i := sort.Search(len(s.Chunks), func(i int) bool { return s.Chunks[i].Offset > off })
	if i == 0 {
		return time.Time{}
	}
	return s.Chunks[i-1].InOrder
}

// GapError reports octets missing from a stream.
type GapError struct {
	Flow    Flow
	Offset  int // first missing octet, relative to the stream's start
	Missing int // octets missing before the next captured ones
}

func (e *GapError) Error() string {
	return fmt.Sprintf("pcapfile: %v: %d octets missing at stream offset %d", e.Flow, e.Missing, e.Offset)
}

// OverlapError reports a retransmitted segment whose octets differ from
// those captured first for the same sequence numbers.
type OverlapError struct {
	Flow   Flow
	Offset int
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("pcapfile: %v: retransmission differs at stream offset %d", e.Flow, e.Offset)
}

// Assembler collects TCP segments and reassembles each direction's byte
// stream by sequence number. Segments may come in any order and may
// overlap (retransmissions); it keeps copies of their payloads.
type Assembler struct {
	flows map[Flow]*flowState
	order []Flow
}

type flowState struct {
	syn, fin, rst bool
	isn           uint32
	ref           uint32 // sequence number the offsets are relative to
	haveRef       bool
	segs          []pending
}

type pending struct {
	rel  int64 // sequence number relative to ref
	data []byte
	time time.Time
	n    int // arrival order, for a stable sort
}

// NewAssembler returns an empty Assembler.
func NewAssembler() *Assembler { return &Assembler{flows: make(map[Flow]*flowState)} }

// Add records one segment.
func (a *Assembler) Add(s Segment) {
	f := Flow{Src: s.Src, Dst: s.Dst}
	st := a.flows[f]
	if st == nil {
		st = &flowState{}
		a.flows[f] = st
		a.order = append(a.order, f)
	}
	seq := s.Seq
	if s.Flags&FlagSYN != 0 {
		if !st.syn {
			st.syn, st.isn = true, s.Seq
		}
		seq++ // the SYN takes one sequence number
	}
	if s.Flags&FlagFIN != 0 {
		st.fin = true
	}
	if s.Flags&FlagRST != 0 {
		st.rst = true
		return // a RST's payload, if any, is diagnostic text, not stream data
	}
	if len(s.Payload) == 0 {
		return
	}
	if !st.haveRef {
		st.ref, st.haveRef = seq, true
	}
	st.segs = append(st.segs, pending{
		rel:  int64(int32(seq - st.ref)),
		data: bytes.Clone(s.Payload),
		time: s.Time,
		n:    len(st.segs),
	})
}

// Streams reassembles every direction seen, in the order each was first
// seen. The error joins the streams' Err values.
func (a *Assembler) Streams() ([]*Stream, error) {
	var out []*Stream
	var errs []error
	for _, f := range a.order {
		s := a.flows[f].assemble(f)
		out = append(out, s)
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return out, errors.Join(errs...)
}

func (st *flowState) assemble(f Flow) *Stream {
	s := &Stream{Flow: f, SYN: st.syn, ISN: st.isn, FIN: st.fin, RST: st.rst}
	if len(st.segs) == 0 {
		return s
	}
	// Where the stream starts, relative to ref.
	var start int64
	if st.syn {
		start = int64(int32(st.isn + 1 - st.ref))
	} else {
		start = st.segs[0].rel
		for _, p := range st.segs {
			start = min(start, p.rel)
		}
	}
	segs := st.segs
	sort.SliceStable(segs, func(i, j int) bool {
		if segs[i].rel != segs[j].rel {
			return segs[i].rel < segs[j].rel
		}
		return segs[i].n < segs[j].n
	})
	next := start // sequence number (relative) of the next octet wanted
	for _, p := range segs {
		end := p.rel + int64(len(p.data))
		if end <= start {
			continue // before the SYN: not part of this stream
		}
		if p.rel > next {
			s.Err = &GapError{Flow: f, Offset: int(next - start), Missing: int(p.rel - next)}
			break
		}
		// Octets this segment repeats must agree with what we have.
		from := max(p.rel, start)
		if over := min(end, next) - from; over > 0 {
			have := s.Data[from-start : from-start+over]
			got := p.data[from-p.rel : from-p.rel+over]
			if !bytes.Equal(have, got) && s.Err == nil {
				i := 0
				for have[i] == got[i] {
					i++
				}
				s.Err = &OverlapError{Flow: f, Offset: int(from-start) + i}
			}
		}
		if end > next {
			c := Chunk{Offset: int(next - start), Time: p.time, InOrder: p.time}
			if n := len(s.Chunks); n > 0 && s.Chunks[n-1].InOrder.After(c.InOrder) {
				c.InOrder = s.Chunks[n-1].InOrder
			}
			s.Chunks = append(s.Chunks, c)
			s.Data = append(s.Data, p.data[next-p.rel:]...)
			next = end
		}
	}
	return s
}

// ReadStreams reads a pcap or pcapng file and reassembles its TCP
// streams. Packets that are not TCP are skipped; a malformed packet or
// file is an error. Gaps and disagreeing retransmissions are reported
// in the error and in the streams' Err, with the streams returned too.
func ReadStreams(r io.Reader) ([]*Stream, error) {
	pr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	a := NewAssembler()
	for i := 1; ; i++ {
		p, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("packet %d: %w", i, err)
		}
		s, err := DecodeTCP(p.LinkType, p.Data)
		if err == ErrNotTCP {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("packet %d: %w", i, err)
		}
		s.Time = p.Time
		a.Add(s)
	}
	return a.Streams()
}

// Lookup returns the stream of flow f, or nil.
func Lookup(streams []*Stream, f Flow) *Stream {
	for _, s := range streams {
		if s.Flow == f {
			return s
		}
	}
	return nil
}
