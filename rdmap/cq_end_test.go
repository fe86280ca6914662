package rdmap

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// Waiting ends with the stream: once every queue pair that reports to a
// completion queue has ended, Wait returns the completions they left and
// then, to every waiter, the error the last one ended with.
func TestCQWaitEndsWithStream(t *testing.T) {
	synctest.Test(t, testCQWaitEndsWithStream)
}

func testCQWaitEndsWithStream(t *testing.T) {
	a, b := newPair(t, pairOpts{})
	rb := b.reg(t, 8, LocalWrite)
	if err := b.qp.PostRecv(RecvWR{ID: 7, SGL: []SGE{{MR: rb, Length: 8}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, cq := range []*CompletionQueue{b.scq, b.scq, b.rcq} {
		wg.Go(func() {
			for {
				c, err := cq.Wait(ctx)
				if err != nil {
					errs <- err
					return
				}
				if c.WRID != 7 || c.Status != StatusWRFlushErr {
					t.Errorf("completion %+v before the end", c)
				}
			}
		})
	}
	// The waiters sleep, then the LLP reports the peer's disconnect.
	synctest.Wait()
	b.scq.mu.Lock()
	b.rcq.mu.Lock()
	if b.scq.sleepers != 2 || b.rcq.sleepers != 1 {
		t.Errorf("%d and %d waiters asleep, want 2 and 1", b.scq.sleepers, b.rcq.sleepers)
	}
	b.rcq.mu.Unlock()
	b.scq.mu.Unlock()
	b.qp.Stream().Close(ddp.ErrDisconnected)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ddp.ErrDisconnected) {
			t.Errorf("Wait = %v, want the stream's end (%v)", err, ddp.ErrDisconnected)
		}
	}
	// A queue pair closed here ends the waiting of its own CQs too.
	a.qp.Close(ctx)
	if _, err := a.rcq.Wait(ctx); !errors.Is(err, errClosed) {
		t.Errorf("Wait on a closed queue pair's CQ = %v, want %v", err, errClosed)
	}
}

// A completion queue that a new queue pair reports to waits again, and a
// fresh one waits until its context ends.
func TestCQWaitWhileQueuePairsRun(t *testing.T) {
	a, _ := newPair(t, pairOpts{})
	a.qp.Close(context.Background())
	if _, err := a.scq.Wait(context.Background()); !errors.Is(err, errClosed) {
		t.Fatalf("Wait = %v, want %v", err, errClosed)
	}
	qp, err := a.pd.NewQueuePair(QPConfig{SendCQ: a.scq, RecvCQ: a.rcq})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close(context.Background())
	for _, cq := range []*CompletionQueue{a.scq, a.dev.NewCompletionQueue(1)} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := cq.Wait(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want %v", err, context.DeadlineExceeded)
		}
	}
}
