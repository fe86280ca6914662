//go:build !js

package datachannel

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// swapConn is a UDP socket that, once swapping is on, holds every fourth
// datagram it is asked to send and sends it after the next one (or after
// a few milliseconds, if none comes): a path that reorders.
type swapConn struct {
	net.PacketConn
	swapping atomic.Bool

	mu    sync.Mutex
	n     int
	held  []byte
	to    net.Addr
	flush *time.Timer
}

func (c *swapConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if !c.swapping.Load() {
		return c.PacketConn.WriteTo(p, addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.held == nil && c.n%4 == 0 {
		c.held, c.to = append([]byte(nil), p...), addr
		c.flush = time.AfterFunc(5*time.Millisecond, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.sendHeld()
		})
		return len(p), nil
	}
	n, err := c.PacketConn.WriteTo(p, addr)
	c.sendHeld()
	return n, err
}

// sendHeld sends the held datagram, if any; the caller holds mu.
func (c *swapConn) sendHeld() {
	if c.held == nil {
		return
	}
	c.flush.Stop()
	_, _ = c.PacketConn.WriteTo(c.held, c.to)
	c.held = nil
}

// newPC returns a PeerConnection on loopback; with conn, its ICE runs on
// that socket alone.
func newPC(t *testing.T, conn net.PacketConn) *webrtc.PeerConnection {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if conn != nil {
		mux := ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: conn})
		t.Cleanup(func() { _ = mux.Close() })
		se.SetICEUDPMux(mux)
	}
	pc, err := webrtc.NewAPI(webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.GracefulClose() })
	return pc
}

// connect hands each PeerConnection's SDP, with all its candidates, to the
// other.
func connect(t *testing.T, offerer, answerer *webrtc.PeerConnection) {
	t.Helper()
	describe := func(pc *webrtc.PeerConnection, create func(*webrtc.OfferOptions) (webrtc.SessionDescription, error)) webrtc.SessionDescription {
		t.Helper()
		d, err := create(nil)
		if err != nil {
			t.Fatal(err)
		}
		gathered := webrtc.GatheringCompletePromise(pc)
		if err := pc.SetLocalDescription(d); err != nil {
			t.Fatal(err)
		}
		<-gathered
		return *pc.LocalDescription()
	}
	if err := answerer.SetRemoteDescription(describe(offerer, offerer.CreateOffer)); err != nil {
		t.Fatal(err)
	}
	answer := func(*webrtc.OfferOptions) (webrtc.SessionDescription, error) { return answerer.CreateAnswer(nil) }
	if err := offerer.SetRemoteDescription(describe(answerer, answer)); err != nil {
		t.Fatal(err)
	}
}

// A negotiated DDP data channel sends its DATA chunks unordered (RFC 5043
// §10: "The adaptation layer MUST use the Unordered option on all Data
// Chunks (U Flag set to one)."), so on a path that reorders packets some
// messages reach the peer before messages sent earlier; with the U flag
// clear, the peer's SCTP would hold every one back until those before it
// arrived, and none would overtake. Each end's own SCTP stream decides how
// it sends, so the channel is checked both ways: as the offerer and as
// the answerer (the demo's Go peer).
func TestNegotiatedChannelSendsUnordered(t *testing.T) {
	for _, sender := range []string{"offerer", "answerer"} {
		t.Run(sender, func(t *testing.T) {
			udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			swap := &swapConn{PacketConn: udp}
			t.Cleanup(func() { _ = udp.Close() })
			pcSend, pcRecv := newPC(t, swap), newPC(t, nil)
			from, err := Create(pcSend, 5, sctpddp.ChannelConfig{})
			if err != nil {
				t.Fatal(err)
			}
			to, err := Create(pcRecv, 5, sctpddp.ChannelConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if sender == "offerer" {
				connect(t, pcSend, pcRecv)
			} else {
				connect(t, pcRecv, pcSend)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, s := range []*Stream{from, to} {
				if err := s.NewSession(ctx); err != nil {
					t.Fatalf("data channel %d did not open: %v", s.ID(), err)
				}
			}
			swap.swapping.Store(true)
			const count = 400
			hdr := []byte{0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0} // tagged, last
			payload := [][]byte{make([]byte, 600)}
			go func() {
				for range count {
					if _, err := from.WriteSegmentv(ctx, hdr, payload); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, wire.MaxDataChannelMULPDU+wire.SSNLen)
			overtaken, highest := 0, -1
			for range count {
				n, ppid, err := to.ReadMessage(ctx, buf)
				if err != nil || ppid != wire.PPIDSegment || n != wire.SSNLen+len(hdr)+600 {
					t.Fatalf("read %d %v %v", n, ppid, err)
				}
				ssn := int(binary.BigEndian.Uint16(buf))
				if ssn < highest {
					overtaken++
				}
				highest = max(highest, ssn)
			}
			if overtaken == 0 {
				t.Fatalf("%d messages on a reordering path, none overtaken: the %s's DATA chunks are ordered (U flag clear)", count, sender)
			}
			t.Logf("%d of %d messages arrived after one sent later", overtaken, count)
		})
	}
}
