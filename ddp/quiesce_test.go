package ddp

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/term"
)

// gatedULP resolves every STag to mem, tells resolved when it has, and
// returns only when gate is closed: a placement caught between its checks
// and its copy.
type gatedULP struct {
	fakeULP
	mem      []byte
	resolved chan struct{}
	gate     chan struct{}
}

func (u *gatedULP) TaggedBuffer(h *Header) (TaggedBuffer, *term.Error) {
	close(u.resolved)
	<-u.gate
	return TaggedBuffer{Mem: u.mem}, nil
}

// Quiesce returns only once a placement whose buffer was resolved before
// it has finished writing (RFC 5040 §8.1.1 item 6: the ULP that revokes
// an STag and then quiesces knows nothing more lands in its memory).
func TestQuiesceWaitsForPlacement(t *testing.T) {
	u := &gatedULP{mem: make([]byte, 64), resolved: make(chan struct{}), gate: make(chan struct{})}
	s, err := NewStream(Config{ULP: u, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{0xab}, 64)
	seg := append((&Header{Tagged: true, Last: true, DV: Version, STag: 0x100}).Append(nil), payload...)
	received := make(chan error, 1)
	go func() { received <- s.Receive(0, seg) }()
	<-u.resolved
	quiesced := make(chan struct{})
	go func() {
		s.Quiesce()
		close(quiesced)
	}()
	waitBlocked(t, "(*Stream).Quiesce")
	close(u.gate)
	<-quiesced
	if !bytes.Equal(u.mem, payload) {
		t.Fatal("Quiesce returned while the segment was still being placed")
	}
	if err := <-received; err != nil {
		t.Fatal(err)
	}
	// With nothing under way it returns at once.
	s.Quiesce()
}

// waitBlocked waits until a goroutine is blocked on a mutex in fn.
func waitBlocked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, fn) {
				return
			}
		}
	}
	t.Fatalf("no goroutine blocked in %s", fn)
}
