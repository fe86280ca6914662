package rdmap

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// "If the Local Peer ULP indicates graceful teardown, the DDP layer on the
// Local Peer SHOULD ensure that all ULP data would be transferred before
// the underlying LLP Stream and Connection are torn down, and any further
// data transfer requests by the Local Peer ULP MUST return an error."
// (RFC 5041 §6.2.1) While Close drains a Read the peer does not answer,
// a post is refused; the Read is flushed when Close's context ends.
func TestPostWhileClosing(t *testing.T) { synctest.Test(t, testPostWhileClosing) }

func testPostWhileClosing(t *testing.T) {
	c := newCrafted(t)
	sink := c.reg(t, 16, LocalWrite)
	mustPost(t, c.qp.PostRead(ReadWR{ID: 1, Local: SGE{MR: sink, Length: 16}, RemoteSTag: 0x1234}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- c.qp.Close(ctx) }()
	synctest.Wait()
	c.qp.mu.Lock()
	closing := c.qp.closing
	c.qp.mu.Unlock()
	if !closing {
		t.Fatal("Close has not begun")
	}
	if c.qp.State() != StateRunning {
		t.Fatalf("state %v: Close did not wait for the Read", c.qp.State())
	}
	for name, err := range map[string]error{
		"Send":  c.qp.PostSend(SendWR{ID: 2}),
		"Write": c.qp.PostWrite(WriteWR{ID: 3, SGL: []SGE{{MR: c.src, Length: 1}}, RemoteSTag: 0x1234}),
		"Read":  c.qp.PostRead(ReadWR{ID: 4, Local: SGE{MR: sink, Length: 1}, RemoteSTag: 0x1234}),
	} {
		if !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s posted while closing: %v", name, err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := wait(t, c.scq); got.WRID != 1 || got.Status != StatusWRFlushErr {
		t.Fatalf("the outstanding Read: %+v", got)
	}
}
