package peer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/iwarpgo/iwarp/rdmap"
)

// MaxWindows bounds the memory windows a peer holds, valid or
// invalidated and not yet deregistered: each is an STag of the device's
// and is listed beside its region.
const MaxWindows = 8

// window is a memory window bound to this peer's queue pair: a second
// STag for part of a region, with its own rights, usable on this queue
// pair's DDP Stream alone (RFC 5041 §8.2's DDP Stream association;
// RFC 5042 §2.2.5's single stream scope). Its bytes are its parent's.
type window struct {
	mw     *rdmap.MemoryWindow
	parent *region
	access rdmap.Access
	valid  bool
}

// WindowName is the name of a window bound over a region of that name.
func WindowName(region string) string { return "window on " + region }

// BindWindow binds a memory window over n octets of the region parent
// from offset off (octets from the region's first, so the window's TO is
// the region's base TO plus off), with remote rights access (any of
// "r", "w" and "a", within the region's), to this peer's queue pair
// alone (rdmap.QueuePair.BindWindow). It returns the window's STag. A
// peer on the queue pair may Write through it, and invalidate it with a
// Send with Invalidate, though the region's own STag stays valid.
func (p *Peer) BindWindow(parent uint32, off uint64, n int, access string) (uint32, error) {
	a, err := ParseAccess(access)
	if err != nil {
		return 0, err
	}
	if a&rdmap.LocalWrite != 0 {
		return 0, errors.New("a memory window grants remote rights only (r, w, a), not local write")
	}
	if a == 0 {
		return 0, errors.New("a memory window needs at least one remote right (r, w or a)")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.windows) >= MaxWindows {
		return 0, fmt.Errorf("at most %d memory windows; deregister one first", MaxWindows)
	}
	if p.findWindow(parent) != nil {
		return 0, fmt.Errorf("STag %#08x is a memory window: bind a window over a region", parent)
	}
	_, r := p.find(parent)
	switch {
	case r == nil:
		return 0, fmt.Errorf("no region with STag %#08x", parent)
	case r.recv:
		return 0, fmt.Errorf("STag %#08x is a receive buffer: bind a window over a region", parent)
	case !r.valid:
		return 0, fmt.Errorf("region %#08x is invalid: a window needs a valid region", parent)
	}
	size := uint64(r.mr.Len())
	if n <= 0 || off >= size || uint64(n) > size-off {
		return 0, fmt.Errorf("a window of %d octets at offset %d does not fit in region %#08x's %d octets", n, off, parent, size)
	}
	if a&^r.mr.Access() != 0 {
		return 0, fmt.Errorf("window rights %q exceed region %#08x's (%s)", access, parent, accessWords(r.mr.Access()))
	}
	mw, err := p.QP.BindWindow(r.mr, off, n, a)
	if err != nil {
		return 0, err
	}
	p.windows = append(p.windows, &window{mw: mw, parent: r, access: a, valid: true})
	p.changed = true
	return mw.STag(), nil
}

// findWindow returns the window of stag, if it is one; p.mu is held.
func (p *Peer) findWindow(stag uint32) *window {
	for _, w := range p.windows {
		if w.mw.STag() == stag {
			return w
		}
	}
	return nil
}

// invalidateWindow invalidates w locally; p.mu is held.
func (p *Peer) invalidateWindow(w *window) error {
	if !w.valid {
		return fmt.Errorf("window %#08x is already invalid", w.mw.STag())
	}
	if err := p.pd.Invalidate(w.mw.STag()); err != nil {
		return err
	}
	w.valid = false
	p.changed = true
	return nil
}

// deregisterWindow invalidates w if it is still valid and forgets it;
// p.mu is held.
func (p *Peer) deregisterWindow(w *window) error {
	if w.valid {
		if err := p.invalidateWindow(w); err != nil {
			return err
		}
	}
	p.windows = slices.DeleteFunc(p.windows, func(x *window) bool { return x == w })
	p.changed = true
	return nil
}

// forgetWindows drops the windows over r, which has been deregistered:
// all were invalid, or rdmap would have refused. p.mu is held.
func (p *Peer) forgetWindows(r *region) {
	p.windows = slices.DeleteFunc(p.windows, func(w *window) bool { return w.parent == r })
}

// windowRegions describes the windows as Regions; p.mu is held.
func (p *Peer) windowRegions() []Region {
	var out []Region
	for _, w := range p.windows {
		out = append(out, Region{
			Name: WindowName(w.parent.name), STag: w.mw.STag(), Base: w.mw.Base(), Len: w.mw.Len(),
			Access: strings.TrimPrefix(accessWords(w.access), "local read, "), Valid: w.valid,
			Window: true, Parent: w.parent.mr.STag(), QP: p.Index,
		})
	}
	return out
}
