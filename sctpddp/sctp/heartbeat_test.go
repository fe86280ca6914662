//go:build !js

package sctp

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// A HEARTBEAT is answered with a HEARTBEAT ACK that returns its Heartbeat
// Info unchanged (RFC 9260 §8.3); one without the mandatory Heartbeat
// Info parameter (§3.3.5), as pion/sctp sends, is discarded, since the
// HEARTBEAT ACK "MUST contain the Heartbeat Information parameter of the
// Heartbeat Request" (§3.3.6) and there is none to return. The packets
// are processed in order: once the second HEARTBEAT's ACK has left, the
// first would have been answered before it.
func TestHeartbeatWithoutInfoDiscarded(t *testing.T) {
	c, s := udpPair(t)
	capture := newCaptureConn(s)
	client, server := assocPair(t, c, capture, Config{HeartbeatInterval: -1}, Config{HeartbeatInterval: -1})
	defer client.Abort()
	defer server.Abort()
	est := server.Established()
	packet := func(chunkBytes []byte) []byte {
		p := binary.BigEndian.AppendUint16(nil, est.PeerPort)
		p = binary.BigEndian.AppendUint16(p, est.LocalPort)
		p = binary.BigEndian.AppendUint32(p, est.LocalVerificationTag)
		p = append(p, 0, 0, 0, 0)
		p = append(p, chunkBytes...)
		chunk.SetPacketChecksum(p)
		return p
	}
	info := []byte("nonce-of-8-octets")
	if _, err := c.Write(packet([]byte{byte(chunk.TypeHeartbeat), 0, 0, 4})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(packet(chunk.Heartbeat{Info: info}.Append(nil))); err != nil {
		t.Fatal(err)
	}
	var acks [][]byte
	waitfor.Until(5*time.Second, func() bool {
		acks = acks[:0]
		capture.mu.Lock()
		for _, p := range capture.pkts {
			if !p.outbound {
				continue
			}
			for it := chunk.Chunks(p.data); it.Next(); {
				if ch := it.Chunk(); ch.Type() == chunk.TypeHeartbeatAck {
					acks = append(acks, bytes.Clone(ch))
				}
			}
		}
		capture.mu.Unlock()
		return len(acks) > 0
	})
	if len(acks) != 1 {
		t.Fatalf("%d HEARTBEAT ACKs, want one, for the HEARTBEAT with Heartbeat Info", len(acks))
	}
	hb, _, err := chunk.ParseHeartbeatAck(acks[0])
	if err != nil || !bytes.Equal(hb.Info, info) {
		t.Fatalf("HEARTBEAT ACK %x (%v): want Heartbeat Info %q returned unchanged", acks[0], err, info)
	}
}
