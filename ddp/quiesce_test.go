package ddp

import (
	"bytes"
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
	time.Sleep(20 * time.Millisecond)
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
