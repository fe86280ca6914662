package sctpddp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// fakeChannel is a data channel that keeps what is sent on it, acknowledged
// when the test says.
type fakeChannel struct {
	mu       sync.Mutex
	sent     [][]byte
	buffered uint64
	closing  bool
}

func (c *fakeChannel) Send(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return errors.New("InvalidStateError")
	}
	c.sent = append(c.sent, append([]byte(nil), msg...))
	c.buffered += uint64(len(msg))
	return nil
}

func (c *fakeChannel) BufferedAmount() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buffered
}

func (c *fakeChannel) Closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// ack makes everything sent acknowledged.
func (c *fakeChannel) ack() {
	c.mu.Lock()
	c.buffered = 0
	c.mu.Unlock()
}

// queueStream is a ChannelStream whose receive side is fed by hand, as a
// channel's message handler would feed it; limit 0 is no bound.
func queueStream(limit, mulpdu int) *ChannelStream {
	if limit == 0 {
		limit = -1
	}
	s, err := NewChannelStream(&fakeChannel{}, 1, ChannelConfig{MULPDU: mulpdu, ReceiveQueueLimit: limit})
	if err != nil {
		panic(err)
	}
	return s
}

func never() bool { return false }

func TestMessageQueueOrderAndShortBuffer(t *testing.T) {
	s := queueStream(0, 1000)
	ctx := context.Background()
	var want [][]byte
	for i := 0; i < 300; i++ {
		m := wire.SegmentChunk{SSN: wire.SSN(i), Segment: make([]byte, 14+i%7)}
		m.Segment[0] = 0xc1
		want = append(want, m.Append(nil))
		if i%3 == 0 {
			c := wire.SessionControl{SSN: wire.SSN(i), Function: wire.FunctionTerminate}
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
		if err != nil || !bytes.Equal(buf[:n], w) || ppid != wire.DataChannelPPID(w) {
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
func TestMessageQueueBackPressure(t *testing.T) { synctest.Test(t, testMessageQueueBackPressure) }

func testMessageQueueBackPressure(t *testing.T) {
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
	synctest.Wait() // the put is blocked
	q.close(ErrChannelClosed)
	if ok := <-done; ok {
		t.Fatal("put after close")
	}
}

// Close ends reads after the queued messages; InterruptRead and ctx end
// a read that waits.
func TestMessageQueueCloseAndInterrupt(t *testing.T) {
	synctest.Test(t, testMessageQueueCloseAndInterrupt)
}

func testMessageQueueCloseAndInterrupt(t *testing.T) {
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
	synctest.Wait() // the read waits
	s.InterruptRead()
	if err := <-errc; !errors.Is(err, ErrReadInterrupted) {
		t.Fatal(err)
	}

	// A text message is consumed and reported as an unexpected PPID.
	s.q.put([]byte("hi"), true, never)
	s.q.put([]byte{0, 0, 0, 4}, false, never)
	s.q.close(ErrChannelClosed)
	if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, wire.ErrUnexpectedPPID) {
		t.Fatal(err)
	}
	if n, ppid, err := s.ReadMessage(ctx, buf); err != nil || n != 4 || ppid != wire.PPIDSessionControl {
		t.Fatalf("message before the close: %d %v %v", n, ppid, err)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, ErrChannelClosed) {
			t.Fatal(err)
		}
	}
	if s.q.put([]byte{1}, false, never) {
		t.Fatal("put after close")
	}
}

// A segment over the MULPDU is consumed and reported.
func TestDataChannelReadChecksMULPDU(t *testing.T) {
	s := queueStream(0, wire.MinMULPDU)
	seg := wire.SegmentChunk{SSN: 1, Segment: make([]byte, wire.MinMULPDU+1)}
	seg.Segment[0] = 0x41
	s.q.put(seg.Append(nil), false, never)
	buf := make([]byte, 1024)
	if _, _, err := s.ReadMessage(context.Background(), buf); !errors.Is(err, wire.ErrSegmentTooLarge) {
		t.Fatal(err)
	}
	if s.q.size != 0 {
		t.Fatal("oversized segment kept")
	}
}

// A ChannelStream waits for the channel to open, numbers its messages,
// refuses a segment the receiver could not frame, and fails once the
// channel closes.
func TestChannelStreamWrites(t *testing.T) {
	ch := &fakeChannel{}
	s, err := NewChannelStream(ch, 3, ChannelConfig{MULPDU: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.WriteSessionControl(short, wire.SessionControl{Function: wire.FunctionInitiate}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write before open: %v", err)
	}
	s.SetReadyState("open")
	tagged := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	if ssn, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate}); err != nil || ssn != 0 {
		t.Fatal(ssn, err)
	}
	if ssn, err := s.WriteSegmentv(ctx, tagged, [][]byte{[]byte("ab")}); err != nil || ssn != 1 {
		t.Fatal(ssn, err)
	}
	bad := append([]byte{0x80}, tagged[1:]...) // DDP Version 0
	if _, err := s.WriteSegmentv(ctx, bad, nil); !errors.Is(err, wire.ErrDataChannelFraming) {
		t.Fatalf("version-0 segment: %v", err)
	}
	if err := s.WriteMessage(ctx, wire.PPIDSegment, wire.AppendSegmentv(nil, 2, bad, nil)); !errors.Is(err, wire.ErrDataChannelFraming) {
		t.Fatalf("version-0 segment chunk: %v", err)
	}
	if _, err := s.WriteSegmentv(ctx, tagged, [][]byte{make([]byte, 1001-len(tagged))}); !errors.Is(err, wire.ErrSegmentTooLarge) {
		t.Fatalf("oversized segment: %v", err)
	}
	if err := s.WriteMessage(ctx, wire.PPIDSegment, wire.AppendSegmentv(nil, 5, tagged, nil)); !errors.Is(err, ErrSSNOutOfOrder) {
		t.Fatalf("DDP-SSN out of order: %v", err)
	}
	want := [][]byte{{0, 0, 0, 1}, append(append([]byte{0, 1}, tagged...), "ab"...)}
	if len(ch.sent) != 2 || !bytes.Equal(ch.sent[0], want[0]) || !bytes.Equal(ch.sent[1], want[1]) || s.NextSSN() != 2 {
		t.Fatalf("sent % x, next %d", ch.sent, s.NextSSN())
	}
	// A new session waits until the previous one's chunks are gone.
	done := make(chan error)
	go func() { done <- s.NewSession(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("NewSession with chunks outstanding: %v", err)
	case <-time.After(5 * recheckInterval):
	}
	ch.ack()
	if err := <-done; err != nil || s.NextSSN() != 0 {
		t.Fatal(err, s.NextSSN())
	}
	s.Closed()
	if _, err := s.WriteSegmentv(ctx, tagged, nil); !errors.Is(err, ErrChannelClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

// Sending a DDP Segment allocates nothing once the stream's buffer has
// grown (the data path allocates nothing): the Chunker frames it in
// place and the transport copies it.
func TestChunkerAllocs(t *testing.T) {
	var sent int
	c := NewChunker(ChunkerConfig{
		MULPDU:         wire.MaxDataChannelMULPDU,
		ImpliedPPID:    true,
		SendQueueLimit: MaxSendQueueLimit,
		Send:           func(_ context.Context, msg []byte, _ wire.PPID) error { sent += len(msg); return nil },
		Buffered:       func() uint64 { return 0 },
		Err:            func() error { return ErrChannelClosed },
	})
	hdr := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	payload := [][]byte{make([]byte, 4096), make([]byte, 4096)}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.WriteSegmentv(ctx, hdr, payload); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per segment", n)
	}
	if sent != 101*(2+len(hdr)+8192) {
		t.Fatal(sent)
	}
}

// ChannelConfig's limits: raised to hold a maximum-size message (two for
// sending), and the send queue cap kept to RFC 5043 §10's bound.
func TestChannelConfigLimits(t *testing.T) {
	for _, m := range []int{wire.MinMULPDU - 1, wire.MaxDataChannelMULPDU + 1} {
		if err := (ChannelConfig{MULPDU: m}).Check(); err == nil {
			t.Errorf("MULPDU %d accepted", m)
		}
	}
	_, send, recv, err := ChannelConfig{MULPDU: wire.MinMULPDU, SendQueueLimit: 1, ReceiveQueueLimit: 1}.resolve()
	if err != nil || send != 2*(wire.MinMULPDU+wire.SSNLen) || recv != wire.MinMULPDU+wire.SSNLen {
		t.Fatalf("limits %d %d %v", send, recv, err)
	}
	if _, _, recv, _ := (ChannelConfig{ReceiveQueueLimit: -1}).resolve(); recv != 0 {
		t.Fatalf("no receive bound: %d", recv)
	}
	_, send, _, _ = ChannelConfig{SendQueueLimit: 1 << 30}.resolve()
	if send != MaxSendQueueLimit || send/wire.MinSegmentChunkLen+controlReserve > wire.MaxInFlight {
		t.Fatalf("send queue limit %d keeps no §10 bound", send)
	}
}

// A transport that never acknowledges anything takes at most 32767
// chunks of a stream, whatever the ULP does: "the sending DDP must simply
// refrain from sending more than 32767 Data Chunks for a single stream
// without acknowledgment. Note that it MUST NOT rely upon ULP flow
// control for this purpose." (RFC 5043 §10)
func TestChunkerNeverAcknowledged(t *testing.T) {
	var buffered uint64
	chunks := 0
	c := NewChunker(ChunkerConfig{
		MULPDU:         wire.MinMULPDU,
		SendQueueLimit: 1 << 40, // as much as a caller may ask
		Send: func(_ context.Context, msg []byte, _ wire.PPID) error {
			buffered += uint64(len(msg))
			chunks++
			return nil
		},
		Buffered: func() uint64 { return buffered },
		Done:     make(chan struct{}),
		Err:      func() error { return ErrChannelClosed },
	})
	ctx := context.Background()
	if _, err := c.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate}); err != nil {
		t.Fatal(err)
	}
	// Then the smallest chunks, a DDP Header alone, until one waits.
	hdr := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	for chunks <= wire.MaxInFlight {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := c.WriteSegmentv(wctx, hdr, nil)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if chunks > wire.MaxInFlight || chunks < wire.MaxInFlight/2 {
		t.Fatalf("%d chunks taken without acknowledgement; the limit is %d", chunks, wire.MaxInFlight)
	}
}
