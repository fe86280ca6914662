//go:build !js

package sctpddp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// RFC 5043 §6.6: "A DDP Stream Session Control message MUST NOT be sent if
// it may be received before a prior DDP Stream Session Control message
// within the same DDP Stream Session."

// dataChunks returns the DATA chunks of one SCTP packet (RFC 4960 §3:
// a 12-byte common header, then chunks padded to 4 bytes).
func dataChunks(p []byte) []dataChunk {
	var out []dataChunk
	for off := 12; off+4 <= len(p); {
		typ, flags := p[off], p[off+1]
		l := int(binary.BigEndian.Uint16(p[off+2:]))
		if l < 4 || off+l > len(p) {
			break
		}
		if typ == 0 && l >= 16 {
			out = append(out, dataChunk{flags: flags, sid: binary.BigEndian.Uint16(p[off+8:]),
				ppid: binary.BigEndian.Uint32(p[off+12:]), data: p[off+16 : off+l]})
		}
		off += (l + 3) &^ 3
	}
	return out
}

// dropConn drops the first SCTP packet written that carries a DATA chunk
// matching drop.
type dropConn struct {
	net.Conn
	drop    func(dataChunk) bool
	mu      sync.Mutex
	dropped bool
}

func (c *dropConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	drop := false
	if !c.dropped {
		for _, d := range dataChunks(p) {
			if c.drop(d) {
				drop, c.dropped = true, true
				break
			}
		}
	}
	c.mu.Unlock()
	if drop {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// A session control message is not sent before the session's earlier one
// is acknowledged: the passive side accepts and closes at once while the
// packet with its Accept is lost, and its Terminate still arrives after
// the Accept. (§6.6: "A DDP Stream Session Control message MUST NOT be
// sent if it may be received before a prior DDP Stream Session Control
// message within the same DDP Stream Session.")
func TestTerminateWaitsForAccept(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.connHook = func(c net.Conn) net.Conn {
		return &dropConn{Conn: c, drop: func(d dataChunk) bool {
			return d.ppid == uint32(wire.PPIDSessionControl) && len(d.data) >= 4 &&
				wire.FunctionCode(binary.BigEndian.Uint16(d.data[2:])) == wire.FunctionEnhancedAccept
		}}
	}
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	b := newPeer(t, nil)
	ctx := testCtx(t)
	go func() {
		r, err := sa.Accept(ctx)
		if err != nil {
			return
		}
		if s, err := r.Accept(b.QP, SessionConfig{}); err == nil {
			s.Close()
		}
	}()
	a := newPeer(t, nil)
	s, err := Connect(ctx, client, 1, a.QP, SessionConfig{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if !waitFor(5*time.Second, func() bool { return s.Err() != nil }) || !errors.Is(s.Err(), ErrSessionTerminated) {
		t.Fatalf("the session ended with %v", s.Err())
	}
}

// A session control message waits until the one before it in the session
// is acknowledged; a DDP Segment does not.
func TestChunkerControlWaitsForAcknowledgement(t *testing.T) {
	ch := &fakeChannel{}
	s, err := NewChannelStream(ch, 3, ChannelConfig{MULPDU: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s.Opened()
	ctx := context.Background()
	if _, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionAccept}); err != nil {
		t.Fatal(err)
	}
	tagged := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := s.WriteSegmentv(ctx, tagged, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Terminate sent with the Accept unacknowledged: %v", err)
	case <-time.After(5 * recheckInterval):
	}
	ch.ack()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(ch.sent) != 3 || ch.sent[2][3] != byte(wire.FunctionTerminate) {
		t.Fatalf("sent % x", ch.sent)
	}
}
