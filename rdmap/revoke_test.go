package rdmap

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/term"
)

// "An RNIC MUST ensure that the network interface can no longer modify an
// Advertised Buffer after the ULP revokes remote access rights for an
// STag." (RFC 5040 §8.1.1 item 6) Deregister and Invalidate return only
// once no segment that may have resolved the STag before is still being
// placed: here a Read Response to the memory is held in its checks (the
// test holds the queue pair's lock that the checks take), and the
// revocation waits for it; the segment then finds the STag invalid and
// places nothing. ddp.TestQuiesceWaitsForPlacement shows that a segment
// past its checks is written whole before Quiesce returns.
func TestRevokeWaitsForPlacement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revoke func(c *crafted, mr *MemoryRegion) error
	}{
		{"Deregister", func(c *crafted, mr *MemoryRegion) error { return mr.Deregister() }},
		{"Invalidate", func(c *crafted, mr *MemoryRegion) error { return c.pd.Invalidate(mr.STag()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafted(t)
			sink := c.reg(t, 64, LocalWrite)
			mustPost(t, c.qp.PostRead(ReadWR{ID: 7, Local: SGE{MR: sink, Length: 16}, RemoteSTag: 0x1234, RemoteTO: 0}))
			c.qp.mu.Lock()
			locked := true
			defer func() {
				if locked {
					c.qp.mu.Unlock()
				}
			}()
			c.peer.send(t, taggedSeg(byte(MakeControl(OpReadResponse)), sink.STag(), 0, bytes.Repeat([]byte{0xab}, 16)))
			waitBlockedIn(t, "rdmap.(*receiver).CheckSegment")
			revoked := make(chan error, 1)
			go func() { revoked <- tc.revoke(c, sink) }()
			select {
			case err := <-revoked:
				t.Fatalf("%s returned (%v) while a segment to the memory was being checked", tc.name, err)
			case <-time.After(50 * time.Millisecond):
			}
			c.qp.mu.Unlock()
			locked = false
			if err := <-revoked; err != nil {
				t.Fatal(err)
			}
			waitState(t, c.qp, StateTerminating)
			if !errors.Is(c.qp.Err(), term.DDPInvalidSTag) || !bytes.Equal(sink.Bytes(), make([]byte, 64)) {
				t.Fatalf("%v; memory % x", c.qp.Err(), sink.Bytes()[:16])
			}
		})
	}
}

// waitBlockedIn waits until a goroutine is blocked on a mutex inside fn.
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	blocked := func() bool {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, fn) {
				return true
			}
		}
		return false
	}
	if !eventually(blocked) {
		t.Fatalf("no goroutine blocked in %s", fn)
	}
}
