package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"

	"github.com/iwarpgo/iwarp/internal/peer"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/datachannel"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// MaxStreams is the most DDP streams (queue pairs, each on its own data
// channel of the one SCTP association) a page may ask for.
const MaxStreams = 2

// holdStream is the Go peer's DDP data channel with the page's MULPDU,
// which may be below RFC 5043 §9's floor (see peer.MinMULPDU): the
// session segments to it and sizes its read buffer by it, as the page
// does. The channel itself accepts segments up to its own, larger limit.
// Its reads can be held for a while: the page's "hold" command, which
// shows that one DDP stream waiting does not hold up another.
type holdStream struct {
	*datachannel.Stream
	mulpdu int

	mu    sync.Mutex
	until time.Time
	wake  chan struct{} // the hold changed
	intr  chan struct{}
}

func newHoldStream(st *datachannel.Stream, mulpdu int) *holdStream {
	return &holdStream{Stream: st, mulpdu: mulpdu, wake: make(chan struct{}, 1), intr: make(chan struct{}, 1)}
}

func (h *holdStream) MULPDU() int { return h.mulpdu }

func (h *holdStream) hold(d time.Duration) {
	h.mu.Lock()
	h.until = time.Now().Add(d)
	h.mu.Unlock()
	signal(h.wake)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *holdStream) InterruptRead() {
	signal(h.intr)
	h.Stream.InterruptRead()
}

func (h *holdStream) ReadMessage(ctx context.Context, buf []byte) (int, wire.PPID, error) {
	if err := h.waitHold(ctx); err != nil {
		return 0, 0, err
	}
	n, ppid, err := h.Stream.ReadMessage(ctx, buf)
	if err != nil {
		return n, ppid, err
	}
	// A hold that began while the read waited holds this message too.
	if err := h.waitHold(ctx); err != nil {
		return 0, 0, err
	}
	return n, ppid, nil
}

// waitHold returns when the stream is not held.
func (h *holdStream) waitHold(ctx context.Context) error {
	for {
		h.mu.Lock()
		wait := time.Until(h.until)
		h.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.wake:
		case <-h.intr:
			t.Stop()
			return sctpddp.ErrReadInterrupted
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// candidatePolicy decides which of a page's ICE candidates the Go peer
// may send to: only UDP ones, of the served address's family, on this
// host when the demo is served on loopback, never to a port below 1024;
// and at most max of them. An offer cannot make the Go peer send
// connectivity checks to addresses of its choosing.
type candidatePolicy struct {
	served net.IP
	max    int
	local  []net.IP // this host's addresses, when the policy was made
}

// newCandidatePolicy makes the policy for an offer to a demo served on
// served. It looks up this host's addresses once: looking them up for
// each candidate would make an offer of a MiB of candidates (20,000)
// cost over a second of CPU.
func newCandidatePolicy(served net.IP, max int) candidatePolicy {
	c := candidatePolicy{served: served, max: max}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			c.local = append(c.local, n.IP)
		}
	}
	return c
}

// isLocal reports whether ip is one of this host's addresses.
func (c candidatePolicy) isLocal(ip net.IP) bool {
	for _, l := range c.local {
		if l.Equal(ip) {
			return true
		}
	}
	return false
}

func (c candidatePolicy) acceptIP(ip net.IP) bool {
	if ip == nil || ip.IsUnspecified() || ip.IsMulticast() || ip.Equal(net.IPv4bcast) {
		return false
	}
	if (ip.To4() != nil) != (c.served.To4() != nil) {
		return false
	}
	switch {
	case c.served.IsLoopback():
		return ip.IsLoopback() || c.isLocal(ip)
	case c.served.IsUnspecified():
		return true
	}
	return !ip.IsLoopback() || c.isLocal(ip)
}

// filter returns the offer with the candidates the policy refuses, and
// those beyond its limit, taken out, and how many there were.
//
// A line is what ends at a LF, without the CRs at either end. RFC 8866
// §5 asks parsers to be tolerant of line ends, and pion's ends some lines
// (m=, c=, o=, t=) at a CR as well as at a LF, and skips the CRs before a
// line: so a line that holds "\ra=candidate" is taken for a candidate
// too, and kept only if it holds no CR inside, as a line after a CR
// could be a candidate that pion reads and this filter does not. Any
// line that begins "a=candidate" is one: pion takes "a=candidate"
// without a colon for a candidate attribute too.
func (c candidatePolicy) filter(sdp string) (out string, kept, total int) {
	lines := strings.SplitAfter(sdp, "\n")
	var b strings.Builder
	for _, l := range lines {
		t := strings.Trim(l, "\r\n")
		if !strings.HasPrefix(t, "a=candidate") && !strings.Contains(t, "\ra=candidate") {
			b.WriteString(l)
			continue
		}
		total++
		if kept >= c.max || strings.ContainsRune(t, '\r') || !c.acceptLine(t) {
			continue
		}
		kept++
		b.WriteString(l)
	}
	return b.String(), kept, total
}

func (c candidatePolicy) acceptLine(l string) bool {
	v, ok := strings.CutPrefix(l, "a=candidate:")
	f := strings.Fields(v)
	if !ok || len(f) < 7 || !strings.EqualFold(f[2], "udp") || f[6] != "typ" {
		return false
	}
	port, err := strconv.Atoi(f[4+1])
	if err != nil || port < 1024 || port > 65535 {
		return false
	}
	return c.acceptIP(net.ParseIP(f[4]))
}

// bindIP is the address the Go peer's ICE socket binds to for an offer
// (as filter returned it). It is the served address, except on
// loopback: a browser that leaves loopback out of its candidates and
// ignores a peer's loopback candidates (Firefox does, unless
// media.peerconnection.ice.loopback is set) offers an address of this
// host instead, and the Go peer binds to the first such address the
// offer names, so that the two meet on it. The policy still takes
// connectivity checks from this host's addresses alone.
func (c candidatePolicy) bindIP(offer string) net.IP {
	if !c.served.IsLoopback() {
		return c.served
	}
	for l := range strings.Lines(offer) {
		t := strings.Trim(l, "\r\n")
		if !strings.HasPrefix(t, "a=candidate:") {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 5 {
			continue
		}
		ip := net.ParseIP(f[4])
		switch {
		case ip == nil:
		case ip.IsLoopback():
			return c.served
		case c.acceptIP(ip):
			return ip
		}
	}
	return c.served
}

// offerParams returns the DDP streams and the MULPDU a page's offer to
// the Go peer asks for, with their defaults, or why they cannot be had.
func offerParams(m Message) (streams, mulpdu int, err error) {
	streams = m.Streams
	if streams == 0 {
		streams = 1
	}
	if streams < 1 || streams > MaxStreams {
		return 0, 0, fmt.Errorf("%d DDP streams asked for: 1 to %d", streams, MaxStreams)
	}
	mulpdu = m.MULPDU
	if mulpdu == 0 {
		mulpdu = wire.MaxDataChannelMULPDU
	}
	if mulpdu < peer.MinMULPDU || mulpdu > wire.MaxDataChannelMULPDU {
		return 0, 0, fmt.Errorf("MULPDU %d outside [%d, %d]", mulpdu, peer.MinMULPDU, wire.MaxDataChannelMULPDU)
	}
	return streams, mulpdu, nil
}

// startWebRTC answers a page's offer with a Go peer on a data channel
// per DDP stream; its ICE socket is bound to one address (bindIP) and
// runs through the tab's impaired network.
func (s *Server) startWebRTC(t *tab, m Message) error {
	t.setGoPeer(nil)
	streams, mulpdu, err := offerParams(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	served := s.host
	s.mu.Unlock()
	if served.IsUnspecified() {
		// Served on every interface (":8080" listens on "::"): the Go
		// peer gathers on every IPv4 interface, as browsers reach it.
		served = net.IPv4zero
	}
	pol := newCandidatePolicy(served, s.cfg.MaxRemoteCandidates)
	offer, kept, total := pol.filter(m.SDP)

	g, err := newGoPeer(t, "webrtc", streams)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			g.close()
		}
	}()
	network, nt := "udp4", webrtc.NetworkTypeUDP4
	if served.To4() == nil {
		network, nt = "udp6", webrtc.NetworkTypeUDP6
	}
	uc, err := net.ListenUDP(network, &net.UDPAddr{IP: pol.bindIP(offer)})
	if err != nil {
		return err
	}
	pl := NewPacketLink(uc, t.impairment())
	g.link = pl
	mux := ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: pl})

	var se webrtc.SettingEngine
	se.SetICEUDPMux(mux)
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{nt})
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetRemoteIPFilter(pol.acceptIP)
	pc, err := webrtc.NewAPI(webrtc.WithSettingEngine(se)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		_ = mux.Close()
		_ = pl.Close()
		return err
	}
	var sessMu sync.Mutex
	var sessions []*sctpddp.Session
	var chans []*datachannel.Stream
	g.closers = []func(){
		func() {
			sessMu.Lock()
			ss := sessions
			sessMu.Unlock()
			for _, x := range ss {
				_ = x.Close()
			}
		},
		g.closeQPs,
		func() {
			for _, c := range chans {
				_ = c.Close()
			}
		},
		func() { _ = pc.Close() },
		func() { _ = mux.Close(); _ = pl.Close(); pl.Wait() },
	}
	for i := range streams {
		st, err := datachannel.Create(pc, streamID(i), sctpddp.ChannelConfig{})
		if err != nil {
			return err
		}
		chans = append(chans, st)
		g.holds = append(g.holds, newHoldStream(st, mulpdu))
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return fmt.Errorf("the page's offer: %w", err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return err
	}
	select {
	case <-gathered:
	case <-time.After(5 * time.Second):
		return errors.New("gathering ICE candidates took over 5 s")
	case <-t.ctx.Done():
		return t.ctx.Err()
	}
	ok = true
	t.setGoPeer(g)
	if err := t.send(Message{Type: "answer", SDP: pc.LocalDescription().SDP, Streams: streams}); err != nil {
		return err
	}
	if total > kept {
		g.report("Go peer: used %d of the offer's %d ICE candidates (UDP, %s, at most %d)", kept, total, pol.describe(), pol.max)
	}
	g.run()
	for i, h := range g.holds {
		p := g.peers[i]
		g.go_(func() {
			req, err := sctpddp.ReadInitiate(g.ctx, h, 10*time.Second)
			if err != nil {
				g.report("the page's DDP Stream Session on data channel %d did not start: %v", h.ID(), err)
				return
			}
			sess, err := req.Accept(p.QP, sctpddp.SessionConfig{Window: peer.Window})
			if err != nil {
				g.report("accepting the DDP Stream Session: %v", err)
				return
			}
			sessMu.Lock()
			sessions = append(sessions, sess)
			sessMu.Unlock()
			if g.ctx.Err() != nil {
				_ = sess.Close()
				return
			}
			g.report("Go peer: DDP Stream Session accepted on data channel %d", sess.ID())
		})
	}
	return nil
}

func (c candidatePolicy) describe() string {
	switch {
	case c.served.IsLoopback():
		return "on this host"
	case c.served.To4() != nil:
		return "IPv4"
	}
	return "IPv6"
}
