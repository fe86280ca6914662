package peer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// windowRegion returns the window of that STag as Regions lists it.
func windowRegion(rs []Region, stag uint32) Region {
	for _, r := range rs {
		if r.Window && r.STag == stag {
			return r
		}
	}
	return Region{}
}

// A window bound over part of a region: listed after the regions with
// its TO, length and rights; a Write through it is placed in the region
// at the window's offset; a Send with Invalidate for it invalidates the
// window and not the region, which stays writable; a Write through it
// after that terminates the stream with Invalid STag.
func TestWindowPlacementAndInvalidation(t *testing.T) {
	a, b, ctx := pair(t)
	mem, err := b.Register("mem", 64, 0x1000, "rw")
	if err != nil {
		t.Fatal(err)
	}
	win, err := b.BindWindow(mem, 16, 16, "w")
	if err != nil {
		t.Fatal(err)
	}
	w := windowRegion(b.Regions(), win)
	want := Region{Name: "window on mem", STag: win, Base: 0x1010, Len: 16, Access: "remote write", Valid: true, Window: true, Parent: mem}
	if w.Name != want.Name || w.STag != want.STag || w.Base != want.Base || w.Len != want.Len || w.Access != want.Access ||
		!w.Valid || !w.Window || w.Parent != mem || len(w.Data) != 0 {
		t.Fatalf("the window: %+v, want %+v", w, want)
	}
	msg := []byte("through a window")
	if _, err := a.Write(msg, win, 0x1010); err != nil {
		t.Fatal(err)
	}
	placed := 0
	waitFor(t, ctx, b, func(e Event) bool {
		if e.Kind != "segment-placed" {
			return false
		}
		if e.STag != win || e.Region != mem || e.Offset != e.TO-0x1000 {
			t.Errorf("placement %+v: want STag %#x placed in region %#x at TO-0x1000", e, win, mem)
		}
		placed += int(e.Len)
		return placed == len(msg)
	})
	if got := regionNamed(b.Regions(), "mem").Data; !bytes.Equal(got[16:32], msg) || !bytes.Equal(got[:16], make([]byte, 16)) {
		t.Errorf("the region drawn: %q", got)
	}

	if _, _, err := b.PostRecv(64); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send([]byte("done"), false, win); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 2*time.Second, func() bool { return !windowRegion(b.Regions(), win).Valid },
		"the window is still valid after a Send with Invalidate")
	if !regionNamed(b.Regions(), "mem").Valid {
		t.Fatal("the Send with Invalidate for the window invalidated the region")
	}
	if _, err := a.Write([]byte("still mine"), mem, 0x1000); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, b, func(e Event) bool { return e.Kind == "message-delivered" && e.Tagged && e.STag == mem })
	if _, err := a.Write(msg, win, 0x1010); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, b, func(e Event) bool {
		return e.Kind == "terminate" && strings.Contains(e.CodeName, "Invalid Steering Tag")
	})
}

// BindWindow refuses what does not make a window, each with its reason,
// and holds at most MaxWindows; Invalidate and Deregister take a window's
// STag as a region's, and a region with a valid window over it stays.
func TestWindowControls(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := p.Register("mem", 64, 0x1000, "rw")
	if err != nil {
		t.Fatal(err)
	}
	ronly, err := p.Register("read only", 64, 0x2000, "r")
	if err != nil {
		t.Fatal(err)
	}
	recv, _, err := p.PostRecv(64)
	if err != nil {
		t.Fatal(err)
	}
	win, err := p.BindWindow(mem, 0, 64, "rw")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stag   uint32
		off    uint64
		n      int
		access string
		why    string
	}{
		{mem, 0, 0, "w", "does not fit"},
		{mem, 0, -1, "w", "does not fit"},
		{mem, 64, 1, "w", "does not fit"},
		{mem, 60, 5, "w", "does not fit"},
		{mem, 1 << 63, 1, "w", "does not fit"},
		{mem, 0, 1 << 62, "w", "does not fit"},
		{mem, 0, 8, "", "at least one remote right"},
		{mem, 0, 8, "x", "unknown access right"},
		{mem, 0, 8, "wl", "remote rights only"},
		{mem, 0, 8, "a", "exceed"},
		{ronly, 0, 8, "w", "exceed"},
		{0xdead01, 0, 8, "w", "no region"},
		{recv, 0, 8, "w", "receive buffer"},
		{win, 0, 8, "w", "is a memory window"},
	} {
		if _, err := p.BindWindow(c.stag, c.off, c.n, c.access); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("BindWindow(%#x, %d, %d, %q): %v, want %q", c.stag, c.off, c.n, c.access, err, c.why)
		}
	}
	if err := p.Invalidate(mem); err == nil {
		t.Error("a region with a valid window over it was invalidated")
	}
	if err := p.Deregister(mem); err == nil {
		t.Error("a region with a valid window over it was deregistered")
	}
	for i := 1; i < MaxWindows; i++ {
		if _, err := p.BindWindow(mem, uint64(i), 1, "w"); err != nil {
			t.Fatalf("window %d: %v", i+1, err)
		}
	}
	if _, err := p.BindWindow(mem, 0, 1, "w"); err == nil || !strings.Contains(err.Error(), "at most 8 memory windows") {
		t.Fatalf("window %d: %v", MaxWindows+1, err)
	}
	if err := p.Invalidate(win); err != nil {
		t.Fatal(err)
	}
	if w := windowRegion(p.Regions(), win); w.Valid || !w.Window {
		t.Errorf("after Invalidate: %+v", w)
	}
	if !regionNamed(p.Regions(), "mem").Valid {
		t.Error("invalidating the window invalidated its region")
	}
	if err := p.Invalidate(win); err == nil {
		t.Error("a window was invalidated twice")
	}
	// An invalidated window still counts until deregistered.
	if _, err := p.BindWindow(mem, 0, 1, "w"); err == nil {
		t.Error("an invalidated window freed its place")
	}
	if err := p.Deregister(win); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BindWindow(mem, 0, 1, "w"); err != nil {
		t.Errorf("after a Deregister: %v", err)
	}
	// Once every window over it is invalid, the region can go, and the
	// windows with it.
	for _, r := range p.Regions() {
		if r.Window {
			if err := p.Invalidate(r.STag); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Deregister(mem); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Regions() {
		if r.Window {
			t.Errorf("a window left: %+v", r)
		}
	}
}
