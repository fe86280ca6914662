// Package peer is one end of the browser demo's RDMAP stream: a queue pair
// with its protection domain, completion queues, registered memory
// regions and posted receive buffers, which reports everything it sees
// (segments sent and placed, completions, Terminates, region changes) as
// Events ready to be drawn. The demo's Go peer (cmd/iwarp demo) and its
// browser peer (wasm/, GOOS=js) both use it, so the two ends of the
// ladder are described in the same words.
//
// Nothing here is OS-specific or starts a goroutine per event: events are
// queued and taken in batches with Drain, which is how the page keeps up
// with thousands of placements a second (one redraw per animation frame).
package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// Limits of what a page may ask for.
const (
	MaxRegionLen = 4096 // octets in one region (a grid cell each)
	MaxRegions   = 16
	// MaxRecvBuffers bounds the receive buffers a peer holds, posted or
	// filled and not yet deregistered: each is drawn as a region too.
	MaxRecvBuffers = 32
	maxEvents      = 4096 // events kept between two Drains; older ones are counted as dropped
	cqDepth        = 256
)

// MinMULPDU is the smallest segment size the demo lets both ends use: an
// RDMA Read Request (an 18-octet untagged DDP header and the 28-octet
// Read Request Header, RFC 5040 §4.4) fits in one segment.
//
// This is below RFC 5043 §9's floor (wire.MinMULPDU, 516 octets) on
// purpose: a demo that cuts a 13-octet Write into several segments shows
// segmentation and out-of-order placement on a grid a person can read.
// Both ends of a demo stream use the same MULPDU, as the session layer
// sizes its read buffer by it.
const MinMULPDU = 48

// Window is the DDP reassembly window the queue pair is made with, and
// the session's: the data channel is unordered, so segments may overtake
// each other, by as many as the sender has in flight, and RFC 5043 §10
// lets it have 32767 Data Chunks unacknowledged. (A window of 256 made
// the demo's Go peer terminate a browser's burst of small Writes under
// CPU load: one lost chunk, retransmitted late, was overtaken by some
// 600.) 32768 slots cost about 2 MB per queue pair.
const Window = wire.MaxInFlight + 1

// Region describes one registered memory region.
type Region struct {
	Name   string `json:"name"`
	STag   uint32 `json:"stag"`
	Base   uint64 `json:"base"`
	Len    int    `json:"len"`
	Access string `json:"access"`
	// Recv marks a receive buffer (posted with PostRecv); MSN is the
	// Message Sequence Number of the Send it takes (RFC 5041 §5.1:
	// buffers are consumed in posting order, the first by MSN 1), and
	// Filled says whether a Send has completed into it.
	Recv   bool   `json:"recv,omitempty"`
	MSN    uint32 `json:"msn,omitempty"`
	Filled bool   `json:"filled,omitempty"`
	Valid  bool   `json:"valid"`
	Data   []byte `json:"data"` // a copy of the memory (JSON: base64)
	// QP is the index of the queue pair the region belongs to, when an
	// end has more than one (Peer.Index).
	QP int `json:"qp,omitempty"`
	// Window marks a memory window (BindWindow): a second STag for Len
	// octets of the region Parent from TO Base, with its own rights
	// (Access, remote ones only), bound to queue pair QP. Its bytes are
	// the parent's: Data is empty, and placements through it are
	// reported in the parent (Event.Region, Event.Offset).
	Window bool   `json:"window,omitempty"`
	Parent uint32 `json:"parent,omitempty"`
}

// Event is one thing that happened, in the page's words. Segment events
// carry the DDP header fields and, for a placement, where the bytes
// landed: Region (an STag of this peer) and Offset within it.
type Event struct {
	Kind   string `json:"kind"`
	Seq    uint32 `json:"seq"`
	Tagged bool   `json:"tagged"`
	Last   bool   `json:"last"`
	Op     string `json:"op,omitempty"`
	STag   uint32 `json:"stag"`
	TO     uint64 `json:"to"`
	QN     uint32 `json:"qn"`
	MSN    uint32 `json:"msn"`
	MO     uint32 `json:"mo"`
	Len    uint32 `json:"len"`
	// Placement: the region the bytes landed in (0 if none is known).
	Region uint32 `json:"region"`
	Offset uint64 `json:"offset"`
	// Completions.
	WRID   uint64 `json:"wrid,omitempty"`
	Status string `json:"status,omitempty"`
	// Orig is an Atomic Operation's original value, in decimal (a
	// JavaScript number cannot hold every uint64).
	Orig string `json:"orig,omitempty"`
	// Terminates and errors: the RFC 5040 §4.8 triple in numbers and
	// words, and which end found the error.
	Layer int    `json:"layer"`
	EType int    `json:"etype"`
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
	// The triple in words: the layer's name and RFC 6580's names of the
	// Error Type and Error Code.
	LayerName string `json:"layerName,omitempty"`
	TypeName  string `json:"typeName,omitempty"`
	CodeName  string `json:"codeName,omitempty"`
	Detail    string `json:"detail,omitempty"` // what exactly was wrong
	Remote    bool   `json:"remote,omitempty"`
	State     string `json:"state,omitempty"`
	Text      string `json:"text,omitempty"` // a line for the log
	// QP is the index of the queue pair that saw the event (Peer.Index).
	QP int `json:"qp,omitempty"`
	// FPDU events (kind "fpdu", MPA over a byte stream; see Tap): the
	// direction, where the FPDU starts in the stream (counted from the
	// first octet of Full Operation, a Marker before it included), its
	// octets on the stream, the ULPDU_Length, PAD, the offsets of the
	// Markers in it and its CRC field. Seq numbers the FPDUs of one
	// direction from 0. Startup frames are kind "mpa-frame" with Text.
	Out     bool   `json:"out,omitempty"`
	Pos     uint64 `json:"pos,omitempty"`
	Wire    int    `json:"wire,omitempty"`
	ULPDU   int    `json:"ulpdu,omitempty"`
	Pad     int    `json:"pad,omitempty"`
	Markers []int  `json:"markers,omitempty"`
	CRC     uint32 `json:"crc,omitempty"`
}

// Peer is one end of the demo's stream. Its methods are safe for
// concurrent use.
type Peer struct {
	dev *rdmap.Device
	pd  *rdmap.ProtectionDomain
	scq *rdmap.CompletionQueue
	rcq *rdmap.CompletionQueue
	QP  *rdmap.QueuePair
	// Index numbers this peer's queue pair among an end's (0 for the
	// first); it is copied into every Event and Region. Set it before
	// the queue pair starts.
	Index int

	// postMu serialises posting and guards scratch's bytes. It is never
	// held with mu taken, and mu is never held while posting: rdmap may
	// call the observer (which takes mu) from within a Post call.
	postMu sync.Mutex

	mu      sync.Mutex // guards the fields below
	regions []*region  // registration order
	windows []*window  // binding order
	events  []Event
	dropped int
	nextWR  uint64 // guarded by postMu
	nextMSN uint32 // MSN of the next receive posted
	changed bool   // regions changed since the last Drain
	scratch *rdmap.MemoryRegion
	result  *rdmap.MemoryRegion // where Atomic Operations' original values land; made by the first
}

type region struct {
	mr    *rdmap.MemoryRegion
	shown []byte // what the page sees: updated from placement events
	name  string
	recv  bool
	msn   uint32
	fill  bool
	valid bool
}

// New makes a peer with an idle queue pair; the caller starts it on a
// transport (sctpddp.ConnectStream, or SessionRequest.Accept with p.QP).
func New() (*Peer, error) {
	p := &Peer{nextMSN: 1, nextWR: 1}
	p.dev = rdmap.NewDevice(rdmap.DeviceConfig{})
	p.pd = p.dev.NewProtectionDomain()
	p.scq = p.dev.NewCompletionQueue(cqDepth)
	p.rcq = p.dev.NewCompletionQueue(cqDepth)
	qp, err := p.pd.NewQueuePair(rdmap.QPConfig{
		SendCQ: p.scq, RecvCQ: p.rcq, Window: Window,
		Observer: trace.Func(p.observe),
	})
	if err != nil {
		return nil, err
	}
	p.QP = qp
	// The source of Writes and Sends: the page's bytes are copied here.
	p.scratch, err = p.pd.RegisterMemory(make([]byte, MaxRegionLen), 0, 0)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Run takes completions off both queues (so that they never overrun)
// until ctx ends. Receive completions mark their buffer filled.
func (p *Peer) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := p.scq.Wait(ctx)
			if err != nil {
				return
			}
			p.completed(c)
		}
	}()
	for {
		c, err := p.rcq.Wait(ctx)
		if err != nil {
			break
		}
		p.completed(c)
	}
	<-done
}

func (p *Peer) completed(c rdmap.Completion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.Op == rdmap.WorkRecv && c.Status == rdmap.StatusSuccess {
		for _, r := range p.regions {
			if r.recv && uint64(r.msn) == c.WRID {
				r.fill = true
				p.changed = true
			}
		}
	}
	if c.Flags&rdmap.FlagInvalidated != 0 {
		if _, r := p.find(c.InvalidatedSTag); r != nil {
			r.valid = false
		}
		if w := p.findWindow(c.InvalidatedSTag); w != nil {
			w.valid = false
		}
		p.changed = true
	}
	// Placements into a Read's sink changed its bytes.
	if c.Op == rdmap.WorkRead {
		p.changed = true
	}
}

// EventOf puts a trace event in the page's words. Where a placement
// landed (Region, Offset) is for the caller to fill in.
func EventOf(e trace.Event) Event {
	ev := Event{
		Kind: e.Kind.String(), Seq: e.Seq, Tagged: e.Tagged, Last: e.Last,
		STag: e.STag, TO: e.TO, QN: e.QN, MSN: e.MSN, MO: e.MO, Len: e.Len,
	}
	switch e.Kind {
	case trace.SegmentSent, trace.SegmentPlaced, trace.MessageDelivered:
		ev.Op = rdmap.Opcode(e.Opcode).String()
	case trace.Completion:
		ev.Op = rdmap.WorkOp(e.Opcode).String()
		ev.WRID = e.WRID
		ev.Status = rdmap.Status(e.Status).String()
	case trace.StateChange:
		ev.State = e.State
	case trace.AtomicExecuted:
		ev.Op = rdmap.AtomicOp(e.Opcode).String()
	}
	if e.Err != nil {
		l, t, c := e.Err.Triple()
		ev.Layer, ev.EType, ev.Code = int(l), int(t), int(c)
		ev.Error = describe(e.Err)
		ev.LayerName = l.String()
		ev.Detail = e.Err.Detail
		ev.TypeName, ev.CodeName, _ = strings.Cut(e.Err.Name(), " / ")
		ev.Remote = !e.Err.Local()
	}
	return ev
}

func (p *Peer) observe(e trace.Event) {
	ev := EventOf(e)
	ev.QP = p.Index
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Kind == trace.SegmentPlaced || e.Kind == trace.AtomicExecuted {
		p.locate(&ev)
		p.changed = true
	}
	if e.Kind == trace.Completion {
		p.atomicResult(&ev)
	}
	if r := p.placedIn(ev); r != nil {
		// The observer runs on the goroutine that placed the bytes (or
		// carried out the Atomic Operation), just after: reading them here
		// does not race with placement, as reading the region from
		// another goroutine would.
		if e.Kind == trace.AtomicExecuted {
			// The word may change again at once, by the program's own
			// atomics (AddLocal): read it as one.
			r.showWord(int(ev.Offset))
		} else {
			end := min(ev.Offset+uint64(ev.Len), uint64(len(r.shown)))
			copy(r.shown[ev.Offset:end], r.mr.Bytes()[ev.Offset:end])
		}
	}
	if len(p.events) >= maxEvents {
		p.dropped++
		return
	}
	p.events = append(p.events, ev)
}

// describe says what a Terminate triple means: layer, type and code in
// RFC 6580's words.
func describe(e *term.Error) string {
	l, t, c := e.Triple()
	s := fmt.Sprintf("%v layer, type 0x%x code 0x%02x: %s", l, t, c, e.Name())
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// locate finds where a placed segment's bytes landed: tagged, in the
// region of its STag at TO - base (RFC 5041 §4.3), or, through a memory
// window, in the window's region at TO - the region's base; untagged on
// queue 0, in the receive buffer its MSN selects, at MO (§4.4). p.mu is
// held.
func (p *Peer) locate(ev *Event) {
	if w := p.findWindow(ev.STag); ev.Tagged && w != nil {
		ev.Region, ev.Offset = w.parent.mr.STag(), ev.TO-w.parent.mr.Base()
		return
	}
	for _, r := range p.regions {
		if ev.Tagged && r.mr.STag() == ev.STag {
			ev.Region, ev.Offset = ev.STag, ev.TO-r.mr.Base()
			return
		}
		if !ev.Tagged && ev.QN == rdmap.QNSend && r.recv && r.msn == ev.MSN {
			ev.Region, ev.Offset = r.mr.STag(), uint64(ev.MO)
			return
		}
	}
}

// placedIn returns the region a placement event landed in, if any.
// p.mu is held.
func (p *Peer) placedIn(ev Event) *region {
	if (ev.Kind != trace.SegmentPlaced.String() && ev.Kind != trace.AtomicExecuted.String()) || ev.Region == 0 {
		return nil
	}
	_, r := p.find(ev.Region)
	if r == nil || ev.Offset >= uint64(len(r.shown)) {
		return nil
	}
	return r
}

// Add queues an event that did not come from the queue pair (an FPDU
// seen on the wire, a line for the log).
func (p *Peer) Add(ev Event) {
	ev.QP = p.Index
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) >= maxEvents {
		p.dropped++
		return
	}
	p.events = append(p.events, ev)
}

// Drain returns the events since the last call, how many were dropped
// because nobody drained them, and whether the regions changed.
func (p *Peer) Drain() (events []Event, dropped int, changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	events, dropped, changed = p.events, p.dropped, p.changed
	p.events, p.dropped, p.changed = nil, 0, false
	return events, dropped, changed
}

// Regions returns the regions and receive buffers with copies of their
// bytes as placement events have reported them, then the memory windows.
func (p *Peer) Regions() []Region {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Region, 0, len(p.regions))
	for _, r := range p.regions {
		out = append(out, Region{
			Name: r.name, STag: r.mr.STag(), Base: r.mr.Base(), Len: r.mr.Len(),
			Access: accessWords(r.mr.Access()), Recv: r.recv, MSN: r.msn, Filled: r.fill,
			Valid: r.valid, Data: slices.Clone(r.shown), QP: p.Index,
		})
	}
	return append(out, p.windowRegions()...)
}

// ParseAccess reads rights as the page names them: any of "r" (remote
// read), "w" (remote write), "a" (remote atomic) and "l" (local write).
func ParseAccess(s string) (rdmap.Access, error) {
	var a rdmap.Access
	for _, c := range s {
		switch c {
		case 'r':
			a |= rdmap.RemoteRead
		case 'w':
			a |= rdmap.RemoteWrite
		case 'a':
			a |= rdmap.RemoteAtomic
		case 'l':
			a |= rdmap.LocalWrite
		default:
			return 0, fmt.Errorf("unknown access right %q (want r, w, a or l)", c)
		}
	}
	return a, nil
}

// Register registers n octets at Tagged Offset base with access rights
// (see ParseAccess) and returns the region's STag.
func (p *Peer) Register(name string, n int, base uint64, access string) (uint32, error) {
	a, err := ParseAccess(access)
	if err != nil {
		return 0, err
	}
	if n <= 0 || n > MaxRegionLen {
		return 0, fmt.Errorf("region length %d outside [1, %d]", n, MaxRegionLen)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.regions) >= MaxRegions {
		return 0, fmt.Errorf("at most %d regions; deregister one first", MaxRegions)
	}
	mr, err := p.pd.RegisterMemory(make([]byte, n), base, a)
	if err != nil {
		return 0, err
	}
	p.regions = append(p.regions, &region{mr: mr, shown: make([]byte, n), name: name, valid: true})
	p.changed = true
	return mr.STag(), nil
}

func (p *Peer) find(stag uint32) (int, *region) {
	for i, r := range p.regions {
		if r.mr.STag() == stag {
			return i, r
		}
	}
	return -1, nil
}

// Deregister releases the region or memory window named by stag and
// forgets it. A region with a valid window over it stays (rdmap's
// ErrWindowBound): invalidate or deregister the window first.
func (p *Peer) Deregister(stag uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.findWindow(stag); w != nil {
		return p.deregisterWindow(w)
	}
	i, r := p.find(stag)
	if r == nil {
		return fmt.Errorf("no region with STag %#08x", stag)
	}
	if r.recv && !r.fill {
		return errors.New("a posted receive buffer cannot be deregistered before a Send fills it")
	}
	if r.valid {
		if err := r.mr.Deregister(); err != nil {
			return err
		}
	}
	p.regions = slices.Delete(p.regions, i, i+1)
	p.forgetWindows(r)
	p.changed = true
	return nil
}

// Invalidate invalidates stag, a region or a memory window, locally: it
// stays drawn, marked invalid, and any access through the STag now
// fails. A window's region stays valid; a region with a valid window
// over it cannot be invalidated (rdmap's ErrWindowBound).
func (p *Peer) Invalidate(stag uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.findWindow(stag); w != nil {
		return p.invalidateWindow(w)
	}
	_, r := p.find(stag)
	if r == nil {
		return fmt.Errorf("no region with STag %#08x", stag)
	}
	if err := p.pd.Invalidate(stag); err != nil {
		return err
	}
	r.valid = false
	p.changed = true
	return nil
}

// PostRecv registers an n-octet receive buffer and posts it. It returns
// the buffer's STag (for drawing) and the MSN of the Send it will take.
func (p *Peer) PostRecv(n int) (uint32, uint32, error) {
	if n <= 0 || n > MaxRegionLen {
		return 0, 0, fmt.Errorf("receive buffer length %d outside [1, %d]", n, MaxRegionLen)
	}
	p.postMu.Lock()
	defer p.postMu.Unlock()
	p.mu.Lock()
	held := 0
	for _, r := range p.regions {
		if r.recv {
			held++
		}
	}
	p.mu.Unlock()
	if held >= MaxRecvBuffers {
		return 0, 0, fmt.Errorf("at most %d receive buffers; deregister a filled one first", MaxRecvBuffers)
	}
	mr, err := p.pd.RegisterMemory(make([]byte, n), 0, rdmap.LocalWrite)
	if err != nil {
		return 0, 0, err
	}
	// Drawn before it is posted, so that a Send placed at once finds it.
	p.mu.Lock()
	msn := p.nextMSN
	r := &region{mr: mr, shown: make([]byte, n), name: fmt.Sprintf("receive buffer MSN %d", msn), recv: true, msn: msn, valid: true}
	p.regions = append(p.regions, r)
	p.changed = true
	p.mu.Unlock()
	// The work request id is the MSN, so a completion names its buffer.
	if err := p.QP.PostRecv(rdmap.RecvWR{ID: uint64(msn), SGL: []rdmap.SGE{{MR: mr, Length: uint32(n)}}}); err != nil {
		p.mu.Lock()
		if i, _ := p.find(mr.STag()); i >= 0 {
			p.regions = slices.Delete(p.regions, i, i+1)
		}
		p.mu.Unlock()
		_ = mr.Deregister()
		return 0, 0, err
	}
	p.mu.Lock()
	p.nextMSN++
	p.mu.Unlock()
	return mr.STag(), msn, nil
}

// stage copies data into the scratch region and returns its SGE.
// p.postMu is held. Work requests are posted one at a time and the scratch region is
// reused, so a caller posts the next only after this one's completion;
// the demo's pace (one button press) makes that so, and Writes are sent
// before Post returns when nothing is outstanding (rdmap's lone-request
// path).
func (p *Peer) stage(data []byte) ([]rdmap.SGE, error) {
	if len(data) > MaxRegionLen {
		return nil, fmt.Errorf("%d octets: at most %d", len(data), MaxRegionLen)
	}
	b := p.scratch.Bytes()
	copy(b, data)
	if len(data) == 0 {
		return nil, nil
	}
	return []rdmap.SGE{{MR: p.scratch, Length: uint32(len(data))}}, nil
}

// wrid returns the next work request id; p.postMu is held.
func (p *Peer) wrid() uint64 { id := p.nextWR; p.nextWR++; return id }

// Write posts an RDMA Write of data to the peer's stag at to.
func (p *Peer) Write(data []byte, stag uint32, to uint64) (uint64, error) {
	p.postMu.Lock()
	defer p.postMu.Unlock()
	sgl, err := p.stage(data)
	if err != nil {
		return 0, err
	}
	id := p.wrid()
	return id, p.QP.PostWrite(rdmap.WriteWR{ID: id, SGL: sgl, RemoteSTag: stag, RemoteTO: to, Inline: len(data) <= 256})
}

// Read posts an RDMA Read of n octets from the peer's stag at to into
// this peer's region sink at offset off.
func (p *Peer) Read(n int, stag uint32, to uint64, sink uint32, off uint64) (uint64, error) {
	p.postMu.Lock()
	defer p.postMu.Unlock()
	p.mu.Lock()
	_, r := p.find(sink)
	p.mu.Unlock()
	if r == nil {
		return 0, fmt.Errorf("no local region with STag %#08x to read into", sink)
	}
	id := p.wrid()
	return id, p.QP.PostRead(rdmap.ReadWR{ID: id, Local: rdmap.SGE{MR: r.mr, Offset: off, Length: uint32(n)}, RemoteSTag: stag, RemoteTO: to})
}

// Send posts one of RFC 5040's four Sends: solicited asks for a Solicited
// Event, and invalidate (non-zero) makes it a Send with Invalidate of
// that remote STag.
func (p *Peer) Send(data []byte, solicited bool, invalidate uint32) (uint64, error) {
	p.postMu.Lock()
	defer p.postMu.Unlock()
	sgl, err := p.stage(data)
	if err != nil {
		return 0, err
	}
	id := p.wrid()
	return id, p.QP.PostSend(rdmap.SendWR{
		ID: id, SGL: sgl, Solicited: solicited,
		Invalidate: invalidate != 0, InvalidateSTag: invalidate, Inline: len(data) <= 256,
	})
}

// accessWords names a region's rights for people.
func accessWords(a rdmap.Access) string {
	s := "local read"
	if a&rdmap.LocalWrite != 0 {
		s += ", local write"
	}
	if a&rdmap.RemoteRead != 0 {
		s += ", remote read"
	}
	if a&rdmap.RemoteWrite != 0 {
		s += ", remote write"
	}
	if a&rdmap.RemoteAtomic != 0 {
		s += ", remote atomic"
	}
	return s
}
