package sctp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// memEnd is one end of an in-memory packet link whose Close is seen by
// the other end as io.EOF once it has read every packet sent before: a
// DTLS connection whose peer sent close_notify behaves so.
type memEnd struct {
	in     chan []byte
	closed chan struct{}
	once   sync.Once
	peer   *memEnd
}

func memLink() (*memEnd, *memEnd) {
	a := &memEnd{in: make(chan []byte, 256), closed: make(chan struct{})}
	b := &memEnd{in: make(chan []byte, 256), closed: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

func (e *memEnd) Read(b []byte) (int, error) {
	select {
	case p := <-e.in:
		return copy(b, p), nil
	default:
	}
	select {
	case p := <-e.in:
		return copy(b, p), nil
	case <-e.closed:
		return 0, net.ErrClosed
	case <-e.peer.closed:
		select {
		case p := <-e.in:
			return copy(b, p), nil
		default:
			return 0, io.EOF
		}
	}
}

func (e *memEnd) Write(b []byte) (int, error) {
	select {
	case <-e.closed:
		return 0, net.ErrClosed
	case <-e.peer.closed:
		return len(b), nil
	case e.peer.in <- bytes.Clone(b):
		return len(b), nil
	}
}

func (e *memEnd) Close() error                     { e.once.Do(func() { close(e.closed) }); return nil }
func (e *memEnd) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (e *memEnd) RemoteAddr() net.Addr             { return &net.UDPAddr{} }
func (e *memEnd) SetDeadline(time.Time) error      { return nil }
func (e *memEnd) SetReadDeadline(time.Time) error  { return nil }
func (e *memEnd) SetWriteDeadline(time.Time) error { return nil }

// TestAssocTransportClosedAfterShutdownComplete has the side that
// started the SHUTDOWN close its transport as soon as it has sent
// SHUTDOWN COMPLETE, as pion/sctp does over DTLS: the other side reads
// the SHUTDOWN COMPLETE and then the transport's end, and must report
// the clean shutdown (ErrClosed) that the packet completed, not the end
// of the transport read after it.
func TestAssocTransportClosedAfterShutdownComplete(t *testing.T) {
	for i := range 20 {
		c, s := memLink()
		a, b := assocPair(t, c, s, Config{}, Config{})
		if err := a.SendMessage(0, 51, false, [][]byte{[]byte("before the SHUTDOWN")}); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("run %d: Close: %v", i, err)
		}
		select {
		case <-b.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: the peer's SHUTDOWN did not end the association", i)
		}
		if err := b.Err(); !errors.Is(err, ErrClosed) {
			t.Fatalf("run %d: after the peer's SHUTDOWN and the transport's end: %v, want ErrClosed", i, err)
		}
		b.Close()
	}
}
