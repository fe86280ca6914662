//go:build !js

package sctpddp_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	. "github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/datachannel"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

type peer = rdmaptest.Peer

var (
	checkGoroutines = CheckGoroutines
	testCtx         = TestCtx
	newPeer         = NewPeer
	waitC           = WaitC
)

// loopbackAPI returns a pion API that gathers only host candidates on
// loopback over UDP/IPv4, with no mDNS and no STUN.
func loopbackAPI() *webrtc.API {
	var se webrtc.SettingEngine
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	return webrtc.NewAPI(webrtc.WithSettingEngine(se))
}

// peerConnectionPair returns two PeerConnections and, made on them before
// they connect, one DDP data channel each with stream identifier id. It
// connects them by handing each one's SDP (with all its candidates) to
// the other, and waits until both channels are open. Both are closed at
// the end of the test.
func peerConnectionPair(t testing.TB, id uint16, cfg ChannelConfig) (pcA, pcB *webrtc.PeerConnection, a, b *datachannel.Stream) {
	t.Helper()
	api := loopbackAPI()
	var err error
	if pcA, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pcA.GracefulClose() })
	if pcB, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pcB.GracefulClose() })
	if a, err = datachannel.Create(pcA, id, cfg); err != nil {
		t.Fatal(err)
	}
	if b, err = datachannel.Create(pcB, id, cfg); err != nil {
		t.Fatal(err)
	}
	// Non-trickle exchange: each description carries its candidates.
	describe := func(pc *webrtc.PeerConnection, d webrtc.SessionDescription) webrtc.SessionDescription {
		t.Helper()
		gathered := webrtc.GatheringCompletePromise(pc)
		if err := pc.SetLocalDescription(d); err != nil {
			t.Fatal(err)
		}
		<-gathered
		return *pc.LocalDescription()
	}
	offer, err := pcA.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pcB.SetRemoteDescription(describe(pcA, offer)); err != nil {
		t.Fatal(err)
	}
	answer, err := pcB.CreateAnswer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pcA.SetRemoteDescription(describe(pcB, answer)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*datachannel.Stream{a, b} {
		if err := s.NewSession(ctx); err != nil {
			t.Fatalf("data channel %d did not open: %v", s.ID(), err)
		}
	}
	return pcA, pcB, a, b
}

// dataChannelSessionPair starts a DDP Stream Session over the two
// streams: ConnectStream on a's side, ReadInitiate and Accept on b's.
func dataChannelSessionPair(t *testing.T, sa, sb *datachannel.Stream, a, b *peer) (*Session, *Session) {
	t.Helper()
	ctx := testCtx(t)
	type res struct {
		s   *Session
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := ReadInitiate(ctx, sb, 5*time.Second)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		if string(r.PrivateData) != "hello" || r.StreamID() != sb.ID() || r.Enhanced == nil {
			ch <- res{nil, errors.New("unexpected request")}
			return
		}
		s, err := r.Accept(b.QP, SessionConfig{PrivateData: []byte("welcome")})
		ch <- res{s, err}
	}()
	cs, err := ConnectStream(ctx, sa, a.QP, SessionConfig{PrivateData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(cs.PeerPrivateData) != "welcome" {
		t.Fatalf("accept private data %q", cs.PeerPrivateData)
	}
	t.Cleanup(func() { cs.Close(); r.s.Close() })
	return cs, r.s
}

// Every RDMAP operation over a DDP Stream Session on a data channel
// between two PeerConnections.
func TestDataChannelSessionAllOperations(t *testing.T) {
	checkGoroutines(t)
	_, _, sa, sb := peerConnectionPair(t, 7, ChannelConfig{})
	if sa.ID() != 7 || sb.ID() != 7 || sa.MULPDU() != wire.MaxDataChannelMULPDU {
		t.Fatalf("ids %d %d, MULPDU %d", sa.ID(), sb.ID(), sa.MULPDU())
	}
	a, b := newPeer(t, nil), newPeer(t, nil)
	dataChannelSessionPair(t, sa, sb, a, b)
	rdmaptest.Exercise(t, a, b)
}

// Closing a PeerConnection ends both sessions: every posted work request
// of both queue pairs completes with WR_FLUSH_ERR.
func TestDataChannelPeerConnectionCloseFlushes(t *testing.T) {
	for _, side := range []string{"initiator", "responder"} {
		t.Run("close the "+side, func(t *testing.T) {
			checkGoroutines(t)
			pcA, pcB, sa, sb := peerConnectionPair(t, 1, ChannelConfig{})
			a, b := newPeer(t, nil), newPeer(t, nil)
			dataChannelSessionPair(t, sa, sb, a, b)
			for _, p := range []*peer{a, b} {
				rbuf := p.Reg(t, 64, rdmap.LocalWrite)
				for i := 0; i < 3; i++ {
					if err := p.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			pc := pcA
			if side == "responder" {
				pc = pcB
			}
			if err := pc.Close(); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*peer{a, b} {
				for i := 0; i < 3; i++ {
					if c := waitC(t, p.RCQ); c.WRID != uint64(i) || c.Status != rdmap.StatusWRFlushErr {
						t.Fatalf("%+v", c)
					}
				}
				if p.QP.State() != rdmap.StateTerminating {
					t.Fatal(p.QP.State())
				}
			}
			ctx := testCtx(t)
			for _, s := range []*datachannel.Stream{sa, sb} {
				if _, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate}); !errors.Is(err, ErrChannelClosed) {
					t.Fatalf("write after close: %v", err)
				}
			}
		})
	}
}

// Closing the data channel itself (not the PeerConnection) makes reads on
// both ends fail once the messages sent before are read.
func TestDataChannelCloseEndsReads(t *testing.T) {
	checkGoroutines(t)
	_, _, sa, sb := peerConnectionPair(t, 3, ChannelConfig{})
	ctx := testCtx(t)
	if _, err := sa.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionInitiate, PrivateData: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.MaxSessionControlLen)
	n, ppid, err := sb.ReadMessage(ctx, buf)
	if err != nil || ppid != wire.PPIDSessionControl || n != 5 {
		t.Fatalf("read %d %v %v", n, ppid, err)
	}
	if err := sa.DataChannel().Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*datachannel.Stream{sa, sb} {
		if _, _, err := s.ReadMessage(ctx, buf); !errors.Is(err, ErrChannelClosed) {
			t.Fatalf("stream %p: read after close: %v", s, err)
		}
	}
}

// The messages of both kinds cross the channel as RFC 5043's chunks, in
// DDP-SSN order, and the receiver tells them apart by content.
func TestDataChannelFramingOnTheWire(t *testing.T) {
	checkGoroutines(t)
	_, _, sa, sb := peerConnectionPair(t, 9, ChannelConfig{MULPDU: 1000})
	ctx := testCtx(t)
	if sa.MULPDU() != 1000 {
		t.Fatal(sa.MULPDU())
	}
	if err := sa.NewSession(ctx); err != nil {
		t.Fatal(err)
	}
	untagged := []byte{0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	tagged := []byte{0xc1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}
	steps := []func() (wire.SSN, error){
		func() (wire.SSN, error) {
			return sa.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 4, ORD: 4}})
		},
		func() (wire.SSN, error) { return sa.WriteSegmentv(ctx, untagged, [][]byte{[]byte("ab"), []byte("cd")}) },
		func() (wire.SSN, error) { return sa.WriteSegmentv(ctx, tagged, nil) },
		func() (wire.SSN, error) {
			return sa.WriteSegmentv(ctx, tagged, [][]byte{make([]byte, 1000-len(tagged))})
		},
		func() (wire.SSN, error) {
			return sa.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate})
		},
	}
	for i, step := range steps {
		if ssn, err := step(); err != nil || ssn != wire.SSN(i) {
			t.Fatalf("write %d: DDP-SSN %d, %v", i, ssn, err)
		}
	}
	buf := make([]byte, 2+1000)
	type msg struct {
		ssn  wire.SSN
		ppid wire.PPID
		n    int
	}
	want := []msg{{0, wire.PPIDSessionControl, 8}, {1, wire.PPIDSegment, 2 + 18 + 4}, {2, wire.PPIDSegment, 16}, {3, wire.PPIDSegment, 1002}, {4, wire.PPIDSessionControl, 4}}
	for i, w := range want {
		n, ppid, err := sb.ReadMessage(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		got := msg{wire.SSN(buf[0])<<8 | wire.SSN(buf[1]), ppid, n}
		if got != w {
			t.Fatalf("message %d: %+v, want %+v", i, got, w)
		}
		if i == 1 && !bytes.Equal(buf[2:n], append(append([]byte(nil), untagged...), "abcd"...)) {
			t.Fatalf("segment % x", buf[:n])
		}
	}
	// The checks on the way out.
	if _, err := sa.WriteSegmentv(ctx, tagged, [][]byte{make([]byte, 1001-len(tagged))}); !errors.Is(err, wire.ErrSegmentTooLarge) {
		t.Fatalf("oversized segment: %v", err)
	}
	bad := append([]byte(nil), tagged...)
	bad[0] = 0x80 // DDP Version 0: its control octet could be 0x00
	if _, err := sa.WriteSegmentv(ctx, bad, nil); !errors.Is(err, wire.ErrDataChannelFraming) {
		t.Fatalf("version-0 segment: %v", err)
	}
	if _, err := sa.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionExperimental}); !errors.Is(err, wire.ErrUnknownFunctionCode) {
		t.Fatalf("experimental function code: %v", err)
	}
	if ssn := sa.NextSSN(); ssn != 5 {
		t.Fatalf("refused writes used DDP-SSNs: next is %d", ssn)
	}
	// A segment over the receiver's MULPDU, from a peer with a larger
	// one, is consumed and reported; so is a text message.
	if err := sa.DataChannel().Send(append([]byte{0, 5}, append(tagged, make([]byte, 1000)...)...)); err != nil {
		t.Fatal(err)
	}
	if err := sa.DataChannel().SendText("hello"); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 2000)
	if _, _, err := sb.ReadMessage(ctx, big); !errors.Is(err, wire.ErrSegmentTooLarge) {
		t.Fatalf("oversized segment received: %v", err)
	}
	if _, _, err := sb.ReadMessage(ctx, big); !errors.Is(err, wire.ErrUnexpectedPPID) {
		t.Fatalf("text message received: %v", err)
	}
}

// A channel that is not a DDP data channel is refused.
func TestNewDataChannelStreamChecks(t *testing.T) {
	checkGoroutines(t)
	pc, err := loopbackAPI().NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.GracefulClose()
	retransmits := uint16(3)
	lifetime := uint16(100)
	ordered := true
	other := "other"
	cases := []struct {
		name string
		mod  func(*webrtc.DataChannelInit)
	}{
		{"ordered", func(o *webrtc.DataChannelInit) { o.Ordered = &ordered }},
		{"default ordering", func(o *webrtc.DataChannelInit) { o.Ordered = nil }},
		{"max retransmits", func(o *webrtc.DataChannelInit) { o.MaxRetransmits = &retransmits }},
		{"max packet lifetime", func(o *webrtc.DataChannelInit) { o.MaxPacketLifeTime = &lifetime }},
		{"other protocol", func(o *webrtc.DataChannelInit) { o.Protocol = &other }},
	}
	for i, c := range cases {
		init := datachannel.NewInit(uint16(20 + i))
		c.mod(init)
		dc, err := pc.CreateDataChannel("x", init)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := datachannel.NewStream(dc, ChannelConfig{}); !errors.Is(err, datachannel.ErrNotDDP) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, m := range []int{wire.MinMULPDU - 1, wire.MaxDataChannelMULPDU + 1} {
		if _, err := datachannel.Create(pc, 40, ChannelConfig{MULPDU: m}); err == nil {
			t.Errorf("MULPDU %d accepted", m)
		}
	}
	s, err := datachannel.Create(pc, 42, ChannelConfig{SendQueueLimit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if s.SendQueueLimit() != MaxSendQueueLimit {
		t.Fatalf("send queue limit %d", s.SendQueueLimit())
	}
	// Writes on a channel that never opens wait for it, until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionTerminate}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write before open: %v", err)
	}
	s.Close()
	if _, err := s.WriteSessionControl(context.Background(), wire.SessionControl{Function: wire.FunctionTerminate}); !errors.Is(err, ErrChannelClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// BenchmarkDataChannelRDMAWrite is BenchmarkRDMAWrite's sctpddp case over
// a WebRTC data channel between two pion PeerConnections on loopback
// (pion's SCTP defaults: MTU 1200, 1 MiB receive window), with 64 KiB
// DDP Segments (MaxDataChannelMULPDU), so that one RDMA Write is one
// data-channel message, and with 16 KiB segments.
//
// Run: go test -run XXX -bench DataChannelRDMAWrite -benchtime 400x ./sctpddp
func BenchmarkDataChannelRDMAWrite(b *testing.B) {
	for _, mulpdu := range []int{wire.MaxDataChannelMULPDU, 16 << 10} {
		b.Run("mulpdu"+strconv.Itoa(mulpdu)+"/64KiB", func(b *testing.B) {
			_, _, sa, sb := peerConnectionPair(b, 1, ChannelConfig{MULPDU: mulpdu})
			ctx := BenchCtx(b)
			x, y := newPeer(b, nil), newPeer(b, nil)
			errc := make(chan error, 1)
			go func() {
				r, err := ReadInitiate(ctx, sb, 5*time.Second)
				if err == nil {
					var s *Session
					if s, err = r.Accept(y.QP, SessionConfig{}); err == nil {
						b.Cleanup(func() { s.Close() })
					}
				}
				errc <- err
			}()
			s, err := ConnectStream(ctx, sa, x.QP, SessionConfig{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			BenchMover(b, NewRDMAWriteMoverOn(b, x, y))
		})
	}
}
