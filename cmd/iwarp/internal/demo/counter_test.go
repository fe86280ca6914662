package demo

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/peer"
)

// The Go peer's shared counter: a page FetchAdds it over the data channel
// while the Go peer adds to it itself ("increment"); every one counts,
// and the page sees the counter's word and each change.
func TestGoPeerCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServer(t, Config{})
	ps := dialPage(t, ctx, s.url, 48, 1, nil)
	c := region(ps.state, goCounterName)
	if c == nil || c.Base != goCounterBase || c.Len != 8 || c.Access != "local read, remote atomic" {
		t.Fatalf("the Go peer's counter: %+v", c)
	}
	counter := func() uint64 {
		r := region(ps.state, goCounterName)
		return binary.NativeEndian.Uint64(r.Data)
	}
	const adds, incs = 6, 3
	for i := range adds {
		id, err := ps.peers[0].Atomic("fetchadd", c.STag, goCounterBase, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if i < incs {
			ps.send(ctx, Message{Type: "go", Op: "increment"})
		}
		// One at a time, as the page posts them.
		for done := false; !done; {
			evs, _, _ := ps.peers[0].Drain()
			for _, e := range evs {
				if e.Kind == "completion" && e.WRID == id {
					if e.Status != "SUCCESS" {
						t.Fatalf("FetchAdd %d: %+v", i, e)
					}
					done = true
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("FetchAdd %d did not complete", i)
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	executed, local := 0, 0
	ps.events(ctx, func(e peer.Event) bool {
		switch {
		case e.Kind == "atomic-executed" && e.Op == "FetchAdd" && e.Region == c.STag:
			executed++
		case e.Kind == "local-atomic" && e.Region == c.STag:
			local++
		}
		return executed == adds && local == incs && counter() == adds+incs
	})
	// The page's last FetchAdd saw the counter before it.
	res := regionNamed(ps.peers[0].Regions(), peer.ResultName)
	if v := binary.NativeEndian.Uint64(res.Data); v >= adds+incs {
		t.Errorf("the last FetchAdd returned %d, below %d expected", v, adds+incs)
	}
}
