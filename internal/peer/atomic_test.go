package peer

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// A shared counter: one peer FetchAdds and CmpSwaps the other's word
// while that peer adds to it locally. The page sees the counter change
// (atomic-executed and local-atomic events, the region's bytes), the
// original values land in the requester's result region, and an atomic
// on a region without the atomic right gets RFC 7306's Terminate.
func TestAtomicCounter(t *testing.T) {
	a, b, ctx := pair(t)
	counter, err := b.Register("counter", 8, 0x8000, "a")
	if err != nil {
		t.Fatal(err)
	}
	value := func(p *Peer, name string) uint64 {
		r := regionNamed(p.Regions(), name)
		if len(r.Data) != 8 {
			t.Fatalf("no 8-octet region %q", name)
		}
		return binary.NativeEndian.Uint64(r.Data)
	}
	// completed waits for wrid's completion and returns the original
	// value it carries.
	completed := func(wrid uint64) string {
		t.Helper()
		var orig string
		waitFor(t, ctx, a, func(e Event) bool {
			if e.Kind == "completion" && e.WRID == wrid && e.Status != "SUCCESS" {
				t.Fatalf("completion %+v", e)
			}
			orig = e.Orig
			return e.Kind == "completion" && e.WRID == wrid
		})
		return orig
	}
	for i := range 5 {
		id, err := a.Atomic("fetchadd", counter, 0x8000, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		orig := completed(id)
		// Before it: i FetchAdds of 1 and i local adds of 10.
		if got := value(a, ResultName); got != uint64(11*i) || orig != strconv.Itoa(11*i) {
			t.Errorf("FetchAdd %d returned %d (the completion says %q), want %d", i, got, orig, 11*i)
		}
		if _, err := b.AddLocal(counter, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(b, "counter"); got != 55 {
		t.Errorf("the counter shows %d, want 55", got)
	}
	waitFor(t, ctx, b, func(e Event) bool {
		return e.Kind == "atomic-executed" && e.Op == "FetchAdd" && e.Region == counter && e.Offset == 0
	})
	// CmpSwap: the compare fails, then succeeds.
	for _, c := range []struct{ compare, want uint64 }{{7, 55}, {55, 99}} {
		id, err := a.Atomic("cmpswap", counter, 0x8000, 99, c.compare)
		if err != nil {
			t.Fatal(err)
		}
		if orig := completed(id); orig != "55" || value(a, ResultName) != 55 {
			t.Errorf("CmpSwap returned %q (region %d), want 55", orig, value(a, ResultName))
		}
		waitFor(t, ctx, b, func(e Event) bool { return e.Kind == "atomic-executed" && e.Op == "CmpSwap" })
		if got := value(b, "counter"); got != c.want {
			t.Errorf("after CmpSwap(compare %d) the counter shows %d, want %d", c.compare, got, c.want)
		}
	}
	if _, err := a.Atomic("fetchsub", counter, 0x8000, 1, 0); err == nil {
		t.Error("an unknown operation was posted")
	}
	// A region the peer may write but not use atomically.
	plain, err := b.Register("plain", 8, 0x9000, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Atomic("fetchadd", plain, 0x9000, 1, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, a, func(e Event) bool {
		return e.Kind == "terminate" && e.Remote && e.Layer == int(term.RDMAPAccessRights.Layer) &&
			e.EType == int(term.RDMAPAccessRights.EType) && e.Code == int(term.RDMAPAccessRights.Code)
	})
}
