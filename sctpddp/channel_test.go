package sctpddp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// queueStream is a DataChannelStream with only its receive side, fed by
// hand as a channel's message handler would feed it.
func queueStream(limit, mulpdu int) *DataChannelStream {
	return &DataChannelStream{q: newMessageQueue(limit), interrupt: make(chan struct{}, 1), mulpdu: mulpdu}
}

func never() bool { return false }

func TestMessageQueueOrderAndShortBuffer(t *testing.T) {
	s := queueStream(0, 1000)
	ctx := context.Background()
	var want [][]byte
	for i := 0; i < 300; i++ {
		m := SegmentChunk{SSN: SSN(i), Segment: make([]byte, 14+i%7)}
		m.Segment[0] = 0xc1
		want = append(want, m.Append(nil))
		if i%3 == 0 {
			c := SessionControl{SSN: SSN(i), Function: FunctionTerminate}
			want = append(want, c.Append(nil))
		}
	}
	for _, w := range want {
		if !s.q.put(w, false, never) {
			t.Fatal("put refused")
		}
	}
	buf := make([]byte, 1002)
	for i, w := range want {
		if i == 5 {
			// A short buffer keeps the message.
			n, _, err := s.ReadMessage(ctx, buf[:len(w)-1])
			if !errors.Is(err, io.ErrShortBuffer) || n != len(w) {
				t.Fatalf("short read: %d %v", n, err)
			}
		}
		n, ppid, err := s.ReadMessage(ctx, buf)
		if err != nil || !bytes.Equal(buf[:n], w) || ppid != DataChannelPPID(w) {
			t.Fatalf("message %d: % x %v %v, want % x", i, buf[:n], ppid, err, w)
		}
	}
	if s.q.size != 0 || s.q.head != 0 || len(s.q.msgs) != 0 {
		t.Fatalf("queue not empty: size %d head %d len %d", s.q.size, s.q.head, len(s.q.msgs))
	}
}

// A queue that never empties does not keep its consumed slots.
func TestMessageQueueCompacts(t *testing.T) {
	q := newMessageQueue(0)
	msg := []byte{0, 0, 0, 4}
	q.put(msg, false, never)
	for i := 0; i < 10000; i++ {
		q.put(msg, false, never)
		if _, err := q.peek(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		q.pop()
	}
	if len(q.msgs)-q.head != 1 || cap(q.msgs) > 256 {
		t.Fatalf("len %d head %d cap %d", len(q.msgs), q.head, cap(q.msgs))
	}
}

// put blocks while the queue holds its limit, until the reader makes
// room, the queue closes, or the channel is gone.
func TestMessageQueueBackPressure(t *testing.T) {
	q := newMessageQueue(100)
	q.put(make([]byte, 60), false, never)
	q.put(make([]byte, 60), false, never) // over the limit now
	done := make(chan bool)
	go func() { done <- q.put(make([]byte, 10), false, never) }()
	select {
	case <-done:
		t.Fatal("put did not wait for room")
	case <-time.After(3 * putRecheck):
	}
	q.peek(context.Background(), nil)
	q.pop()
	if ok := <-done; !ok {
		t.Fatal("put refused after room was made")
	}
	if q.size != 70 {
		t.Fatal(q.size)
	}
	// A full queue whose channel is gone drops the message.
	q.put(make([]byte, 60), false, never)
	var gone atomic.Bool
	go func() { done <- q.put(make([]byte, 10), false, gone.Load) }()
	gone.Store(true)
	if ok := <-done; ok {
		t.Fatal("put kept a message for a closed channel")
	}
	// Close releases a blocked put too.
	go func() { done <- q.put(make([]byte, 10), false, never) }()
	time.Sleep(putRecheck / 2)
	q.close(ErrDataChannelClosed)
	if ok := <-done; ok {
		t.Fatal("put after close")
	}
}

// Close ends reads after the queued messages; InterruptRead and ctx end
// a read that waits.
func TestMessageQueueCloseAndInterrupt(t *testing.T) {
	s := queueStream(0, 1000)
	ctx := context.Background()
	buf := make([]byte, 100)

	// InterruptRead before a read: the next read returns at once, the one
	// after it waits again.
	s.InterruptRead()
	if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, ErrReadInterrupted) {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := s.ReadMessage(short, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	// InterruptRead during a read.
	errc := make(chan error)
	go func() {
		_, _, err := s.ReadMessage(ctx, buf)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.InterruptRead()
	if err := <-errc; !errors.Is(err, ErrReadInterrupted) {
		t.Fatal(err)
	}

	// A text message is consumed and reported as an unexpected PPID.
	s.q.put([]byte("hi"), true, never)
	s.q.put([]byte{0, 0, 0, 4}, false, never)
	s.q.close(ErrDataChannelClosed)
	if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, ErrUnexpectedPPID) {
		t.Fatal(err)
	}
	if n, ppid, err := s.ReadMessage(ctx, buf); err != nil || n != 4 || ppid != PPIDSessionControl {
		t.Fatalf("message before the close: %d %v %v", n, ppid, err)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, ErrDataChannelClosed) {
			t.Fatal(err)
		}
	}
	if s.q.put([]byte{1}, false, never) {
		t.Fatal("put after close")
	}
}

// A segment over the MULPDU is consumed and reported.
func TestDataChannelReadChecksMULPDU(t *testing.T) {
	s := queueStream(0, MinMULPDU)
	seg := SegmentChunk{SSN: 1, Segment: make([]byte, MinMULPDU+1)}
	seg.Segment[0] = 0x41
	s.q.put(seg.Append(nil), false, never)
	buf := make([]byte, 1024)
	if _, _, err := s.ReadMessage(context.Background(), buf); !errors.Is(err, ErrSegmentTooLarge) {
		t.Fatal(err)
	}
	if s.q.size != 0 {
		t.Fatal("oversized segment kept")
	}
}
