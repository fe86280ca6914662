package peer

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/iwarpgo/iwarp/rdmap"
)

// ResultName is the region where this peer's Atomic Operations leave the
// Original Remote Data Value (RFC 7306 §5.2.2): 8 octets, made by the
// first Atomic.
const ResultName = "atomic original value"

// Atomic posts one of RFC 7306's Atomic Operations on the 8-octet word of
// the peer's stag at to, which must be 64-bit aligned: op "fetchadd" adds
// data; "cmpswap" writes data if the word equals compare. The word's value
// before the operation lands in this peer's ResultName region, as the
// original value lands in the local buffer of ibv_post_send's
// IBV_WR_ATOMIC_FETCH_AND_ADD.
func (p *Peer) Atomic(op string, stag uint32, to, data, compare uint64) (uint64, error) {
	wr := rdmap.AtomicWR{RemoteSTag: stag, RemoteTO: to}
	switch op {
	case "fetchadd":
		wr.Op, wr.Add = rdmap.FetchAdd, data
	case "cmpswap":
		wr.Op, wr.Swap, wr.Compare = rdmap.CmpSwap, data, compare
	default:
		return 0, fmt.Errorf("unknown Atomic Operation %q (want fetchadd or cmpswap)", op)
	}
	p.postMu.Lock()
	defer p.postMu.Unlock()
	res, err := p.resultRegion()
	if err != nil {
		return 0, err
	}
	wr.ID, wr.Local = p.wrid(), rdmap.SGE{MR: res, Length: 8}
	return wr.ID, p.QP.PostAtomic(wr)
}

// resultRegion returns the ResultName region, registering it the first
// time. p.postMu is held.
func (p *Peer) resultRegion() (*rdmap.MemoryRegion, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.result != nil {
		return p.result, nil
	}
	if len(p.regions) >= MaxRegions {
		return nil, fmt.Errorf("at most %d regions; deregister one first", MaxRegions)
	}
	mr, err := p.pd.RegisterMemory(make([]byte, 8), 0, rdmap.LocalWrite)
	if err != nil {
		return nil, err
	}
	p.regions = append(p.regions, &region{mr: mr, shown: make([]byte, 8), name: ResultName, valid: true})
	p.result, p.changed = mr, true
	return mr, nil
}

// AddLocal adds n to the word at offset off of this peer's region stag
// with sync/atomic, beside the Atomic Operations its peer may carry out
// on the same word at the same moment (rdmap.MemoryRegion.Word), and
// returns the word's value before. The page sees it as an event of kind
// "local-atomic".
func (p *Peer) AddLocal(stag uint32, off int, n uint64) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, r := p.find(stag)
	if r == nil {
		return 0, fmt.Errorf("no region with STag %#08x", stag)
	}
	w, err := r.mr.Word(off)
	if err != nil {
		return 0, err
	}
	v := atomic.AddUint64(w, n)
	r.showWord(off)
	p.changed = true
	ev := Event{Kind: "local-atomic", Op: "FetchAdd", Tagged: true, STag: stag, TO: r.mr.Base() + uint64(off), Len: 8,
		Region: stag, Offset: uint64(off), QP: p.Index, Text: fmt.Sprintf("local FetchAdd %d: %d -> %d", n, v-n, v)}
	if len(p.events) >= maxEvents {
		p.dropped++
	} else {
		p.events = append(p.events, ev)
	}
	return v - n, nil
}

// showWord copies the word at off into what the page is shown, read as
// one atomic load: the program and its peers may change it at any time.
func (r *region) showWord(off int) {
	w, err := r.mr.Word(off)
	if err != nil || off+8 > len(r.shown) {
		return
	}
	binary.NativeEndian.PutUint64(r.shown[off:], atomic.LoadUint64(w))
}

// atomicResult puts an Atomic Operation's original value in its
// completion's event and in what the page is shown of the result region.
// It runs on the goroutine that reported the completion, which rdmap does
// after writing the value (and, with one Atomic outstanding at a time, as
// the page posts them, before any other writes the region). p.mu is held.
func (p *Peer) atomicResult(ev *Event) {
	if p.result == nil || ev.Status != rdmap.StatusSuccess.String() ||
		(ev.Op != rdmap.WorkFetchAdd.String() && ev.Op != rdmap.WorkCompSwap.String()) {
		return
	}
	v := binary.NativeEndian.Uint64(p.result.Bytes())
	ev.Orig = strconv.FormatUint(v, 10)
	if _, r := p.find(p.result.STag()); r != nil {
		binary.NativeEndian.PutUint64(r.shown, v)
		p.changed = true
	}
}
