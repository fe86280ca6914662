//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

type peer = rdmaptest.Peer

func newPeer(t testing.TB, obs trace.Observer) *peer {
	return rdmaptest.NewPeer(t, rdmap.QPConfig{Observer: obs, SendDepth: 256})
}

func waitC(t testing.TB, cq *rdmap.CompletionQueue) rdmap.Completion { return rdmaptest.Wait(t, cq) }

// sessionPair connects client and server queue pairs in a DDP Stream
// Session on stream id of one association.
func sessionPair(t *testing.T, server, client *Association, sa *SessionAcceptor, id uint16, a, b *peer) (*Session, *Session) {
	t.Helper()
	ctx := testCtx(t)
	type res struct {
		s   *Session
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := sa.Accept(ctx)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		if string(r.PrivateData) != "hello" || r.StreamID() != id || r.Enhanced == nil {
			ch <- res{nil, errors.New("unexpected request")}
			return
		}
		s, err := r.Accept(b.QP, SessionConfig{PrivateData: []byte("welcome")})
		ch <- res{s, err}
	}()
	cs, err := Connect(ctx, client, id, a.QP, SessionConfig{PrivateData: []byte("hello")})
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
	return cs, r.s
}

func fillp(b []byte, seed byte) []byte { return rdmaptest.Fill(b, seed) }

// Every RDMAP operation over real DTLS/UDP on loopback.
func TestSessionAllOperations(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	a, b := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 1, a, b)
	rdmaptest.Exercise(t, a, b)
}

// reorderRelay forwards UDP datagrams between a client and a server,
// holding back every fifth one from the client for a moment, so that SCTP
// really delivers unordered chunks out of order.
type reorderRelay struct {
	conn   *net.UDPConn
	server *net.UDPAddr
	mu     sync.Mutex
	client *net.UDPAddr
	wg     sync.WaitGroup
}

func newReorderRelay(t *testing.T, server net.Addr) *reorderRelay {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &reorderRelay{conn: c, server: server.(*net.UDPAddr)}
	r.wg.Add(1)
	go r.loop()
	t.Cleanup(func() { c.Close(); r.wg.Wait() })
	return r
}

func (r *reorderRelay) loop() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	n := 0
	for {
		k, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		pkt := append([]byte(nil), buf[:k]...)
		if from.Port == r.server.Port && from.IP.Equal(r.server.IP) {
			r.mu.Lock()
			to := r.client
			r.mu.Unlock()
			if to != nil {
				r.conn.WriteToUDP(pkt, to)
			}
			continue
		}
		r.mu.Lock()
		r.client = from
		r.mu.Unlock()
		n++
		if n > 20 && n%5 == 0 {
			r.wg.Add(1)
			time.AfterFunc(3*time.Millisecond, func() { // held back: it arrives after later ones
				defer r.wg.Done()
				r.conn.WriteToUDP(pkt, r.server)
			})
			continue
		}
		r.conn.WriteToUDP(pkt, r.server)
	}
}

// Over a path that reorders datagrams, segments are placed as they arrive
// — out of DDP-SSN order — and delivered in order: the event stream shows
// a segment placed while an earlier one is still missing, and the Send
// after the Write is delivered last.
func TestSessionPlacementBeforeDelivery(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.MTU, cli.MTU = DefaultMTU, DefaultMTU
	ctx := testCtx(t)
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	relay := newReorderRelay(t, l.Addr())
	ach := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		ach <- a
	}()
	client, err := Dial(ctx, "udp", relay.conn.LocalAddr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server := <-ach
	t.Cleanup(func() { server.Close() })

	var mu sync.Mutex
	var placed []uint32
	var delivered []trace.Event
	obs := trace.Func(func(e trace.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case trace.SegmentPlaced:
			placed = append(placed, e.Seq)
		case trace.MessageDelivered:
			delivered = append(delivered, e)
		}
	})
	a, b := newPeer(t, nil), newPeer(t, obs)
	sessionPair(t, server, client, server.Sessions(0), 3, a, b)
	target := b.Reg(t, 4<<20, rdmap.RemoteWrite)
	rbuf := b.Reg(t, 16, rdmap.LocalWrite)
	b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 16}}})
	src := a.Reg(t, 4<<20, 0)
	fillp(src.Bytes(), 3)
	a.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 4 << 20}}, RemoteSTag: target.STag(), Unsignaled: true})
	a.QP.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: src, Length: 16}}})
	waitC(t, b.RCQ)
	if !bytes.Equal(target.Bytes(), src.Bytes()) {
		t.Fatal("written bytes differ")
	}
	mu.Lock()
	defer mu.Unlock()
	outOfOrder := 0
	var max uint32
	for i, s := range placed {
		if i > 0 && s < max {
			outOfOrder++
		}
		if s > max {
			max = s
		}
	}
	t.Logf("%d segments placed, %d of them after a later one", len(placed), outOfOrder)
	if outOfOrder == 0 {
		t.Fatal("no segment was placed out of order: the path did not reorder")
	}
	if len(delivered) != 2 || !delivered[0].Tagged || delivered[1].Tagged || delivered[0].Len != 4<<20 {
		t.Fatalf("deliveries %+v", delivered)
	}
}

// Several DDP streams share one association, each with its own queue
// pair and its own ordering.
func TestSessionsShareAnAssociation(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	const streams = 3
	var as, bs []*peer
	for i := 0; i < streams; i++ {
		a, b := newPeer(t, nil), newPeer(t, nil)
		sessionPair(t, server, client, sa, uint16(10+i), a, b)
		as, bs = append(as, a), append(bs, b)
	}
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		a, b := as[i], bs[i]
		rbuf := b.Reg(t, 64*100, rdmap.LocalWrite)
		for k := 0; k < 100; k++ {
			b.QP.PostRecv(rdmap.RecvWR{ID: uint64(k), SGL: []rdmap.SGE{{MR: rbuf, Offset: uint64(64 * k), Length: 64}}})
		}
		src := a.Reg(t, 64, 0)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < 100; k++ {
				src.Bytes()[0] = byte(i)
				if err := a.QP.PostSend(rdmap.SendWR{ID: uint64(k), SGL: []rdmap.SGE{{MR: src, Length: 1}}, Inline: true}); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	for i := 0; i < streams; i++ {
		for k := 0; k < 100; k++ {
			c := waitC(t, bs[i].RCQ)
			if c.WRID != uint64(k) || c.ByteLen != 1 {
				t.Fatalf("stream %d: receive %d: %+v", i, k, c)
			}
		}
	}
}

// The ULP's Reject reaches the initiator with its Private Data, as the
// initiator's reaches the passive ULP: "If reported, any supplied Private
// Data MUST be available for the ULP to examine." (RFC 5043 §5.2.3) A
// request refused without the ULP's decision gets a Terminate, never a
// Reject: "A DDP Stream Session Reject message MUST NOT be sent unless
// the rejection is at the direction of the ULP." (§6.3, §6.4) Such are a
// request left past AcceptTimeout and one the ULP hands back with
// SessionRequest.Terminate.
func TestSessionReject(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.AcceptTimeout = 300 * time.Millisecond
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	ctx := testCtx(t)
	seen := make(chan []byte, 1)
	go func() {
		r, err := sa.Accept(ctx)
		if err == nil {
			seen <- r.PrivateData
			r.Reject([]byte("no, thanks"), 4, 4)
		}
	}()
	_, err := Connect(ctx, client, 1, newPeer(t, nil).QP, SessionConfig{PrivateData: []byte("hello")})
	var re *ddp.RejectedError
	if !errors.As(err, &re) || string(re.PrivateData) != "no, thanks" || re.Enhanced == nil || re.Enhanced.IRD != 4 {
		t.Fatalf("Connect = %v", err)
	}
	if pd := <-seen; string(pd) != "hello" {
		t.Fatalf("the passive ULP saw Private Data %q", pd)
	}
	// Nobody takes the request: it expires.
	_, err = Connect(ctx, client, 3, newPeer(t, nil).QP, SessionConfig{})
	if !errors.Is(err, ErrSessionTerminated) || errors.As(err, &re) {
		t.Fatalf("Connect with the request left waiting = %v", err)
	}
	// The ULP takes it and hands it back.
	go func() {
		r, err := sa.Accept(ctx)
		if err == nil {
			r.Terminate()
		}
	}()
	_, err = Connect(ctx, client, 5, newPeer(t, nil).QP, SessionConfig{})
	if !errors.Is(err, ErrSessionTerminated) || errors.As(err, &re) {
		t.Fatalf("Connect with the request terminated = %v", err)
	}
}

func TestSessionBasicAndIRDORD(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	// Basic RFC 5043 codes: no IRD/ORD.
	go func() {
		r, err := sa.Accept(testCtx(t))
		if err == nil && r.Enhanced == nil {
			r.Accept(newPeer(t, nil).QP, SessionConfig{})
		}
	}()
	a := newPeer(t, nil)
	s, err := Connect(testCtx(t), client, 1, a.QP, SessionConfig{Basic: true})
	if err != nil || s.PeerEnhanced != nil {
		t.Fatalf("basic Connect = %v", err)
	}
	// Enhanced: the responder's IRD of 2 lowers the initiator's ORD.
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(16)
	small, _ := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq, IRD: 2, ORD: 1})
	defer small.Close(context.Background())
	go func() {
		r, err := sa.Accept(testCtx(t))
		if err == nil {
			r.Accept(small, SessionConfig{})
		}
	}()
	c := newPeer(t, nil)
	s, err = Connect(testCtx(t), client, 2, c.QP, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if ird, ord := c.QP.ReadLimits(); ord != 2 || ird != 8 || s.PeerEnhanced.IRD != 2 || s.PeerEnhanced.ORD != 1 {
		t.Fatalf("negotiated IRD %d ORD %d; peer sent %+v", ird, ord, s.PeerEnhanced)
	}
}

// A queue pair closed the moment its session has started it: Close
// closes the session, whose goroutines must already be counted (the race
// detector saw the WaitGroup's Wait race the session's Add once in a CI
// run), and Accept and Close both return.
func TestSessionCloseWhileStarting(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	for i := range 10 {
		b := newPeer(t, nil)
		accepted := make(chan error, 1)
		go func() {
			r, err := sa.Accept(testCtx(t))
			if err == nil {
				_, err = r.Accept(b.QP, SessionConfig{})
			}
			accepted <- err
		}()
		closed := rdmaptest.CloseWhenStarted(b.QP)
		a := newPeer(t, nil)
		if _, err := Connect(testCtx(t), client, uint16(1+i), a.QP, SessionConfig{}); err != nil {
			t.Fatalf("Connect %d: %v", i, err)
		}
		<-closed
		<-accepted // nil, or an error if Close came first
		a.QP.Close(testCtx(t))
	}
}

// rawStream opens a DDP stream and writes raw SCTP messages on it.
func rawWrite(t *testing.T, st *Stream, ppid wire.PPID, msg []byte) {
	t.Helper()
	if err := st.s.Write(context.Background(), msg, ppid); err != nil {
		t.Fatal(err)
	}
}

// Bad input on the session layer: each gets RFC 5043's answer — the
// session is terminated (a DDP Stream Session Terminate) — and nothing is
// placed.
func TestSessionBadInput(t *testing.T) {
	type tc struct {
		name string
		// after the session is up, the client's raw stream sends these
		send func(t *testing.T, st *Stream, target uint32)
	}
	seg := func(ssn wire.SSN, stag uint32) []byte {
		h := []byte{0xc1, 0x40, byte(stag >> 24), byte(stag >> 16), byte(stag >> 8), byte(stag), 0, 0, 0, 0, 0, 0, 0, 0, 'x'}
		return wire.SegmentChunk{SSN: ssn, Segment: h}.Append(nil)
	}
	cases := []tc{
		{"forged DDP-SSN far out of the window", func(t *testing.T, st *Stream, stag uint32) {
			rawWrite(t, st, wire.PPIDSegment, seg(40000, stag))
		}},
		{"DDP-SSN of the Accept again", func(t *testing.T, st *Stream, stag uint32) {
			rawWrite(t, st, wire.PPIDSegment, seg(0, stag))
		}},
		{"unknown PPID", func(t *testing.T, st *Stream, stag uint32) {
			rawWrite(t, st, wire.PPID(99), seg(1, stag))
		}},
		{"a second Initiate on an established stream", func(t *testing.T, st *Stream, stag uint32) {
			m := wire.SessionControl{SSN: 1, Function: wire.FunctionInitiate}
			rawWrite(t, st, wire.PPIDSessionControl, m.Append(nil))
		}},
		{"private data over 512 octets", func(t *testing.T, st *Stream, stag uint32) {
			m := wire.SessionControl{SSN: 1, Function: wire.FunctionAccept, PrivateData: make([]byte, 600)}
			rawWrite(t, st, wire.PPIDSessionControl, m.Append(nil))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := pinnedConfigs(t)
			server, client := connect(t, srv, cli)
			sa := server.Sessions(0)
			b := newPeer(t, nil)
			target := b.Reg(t, 64, rdmap.RemoteWrite)
			rbuf := b.Reg(t, 64, rdmap.LocalWrite)
			b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}})
			go func() {
				r, err := sa.Accept(testCtx(t))
				if err == nil {
					r.Accept(b.QP, SessionConfig{})
				}
			}()
			// The client is scripted by hand: Initiate, wait for the Accept.
			st, err := client.OpenStream(5)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.WriteSessionControl(testCtx(t), wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2048)
			n, ppid, err := st.ReadMessage(testCtx(t), buf)
			if err != nil || ppid != wire.PPIDSessionControl {
				t.Fatal(err)
			}
			if m, _, _ := wire.ParseSessionControl(buf[:n]); m.Function != wire.FunctionEnhancedAccept {
				t.Fatalf("reply %v", m.Function)
			}
			tc.send(t, st, target.STag())
			// The session is terminated: the server sends a DDP Stream
			// Session Terminate, and its queue pair flushes.
			for {
				n, ppid, err := st.ReadMessage(testCtx(t), buf)
				if err != nil {
					t.Fatalf("no Session Terminate: %v", err)
				}
				if ppid == wire.PPIDSessionControl {
					if m, _, _ := wire.ParseSessionControl(buf[:n]); m.Function == wire.FunctionTerminate {
						break
					}
				}
			}
			if c := waitC(t, b.RCQ); c.Status != rdmap.StatusWRFlushErr {
				t.Fatalf("receive %+v", c)
			}
			if !errors.Is(b.QP.Err(), ddp.ErrLLPLost) || !bytes.Equal(target.Bytes(), make([]byte, 64)) {
				t.Fatalf("error %v; memory % x", b.QP.Err(), target.Bytes()[:4])
			}
		})
	}
}

// A segment before the session starts, and more pending Initiates than
// the limit, are answered with a DDP Stream Session Terminate.
func TestSessionBeforeAccept(t *testing.T) {
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(1)
	expectTerminate := func(st *Stream) {
		t.Helper()
		buf := make([]byte, 2048)
		n, ppid, err := st.ReadMessage(testCtx(t), buf)
		if err != nil || ppid != wire.PPIDSessionControl {
			t.Fatalf("%v %v", ppid, err)
		}
		if m, _, _ := wire.ParseSessionControl(buf[:n]); m.Function != wire.FunctionTerminate {
			t.Fatalf("reply %v", m.Function)
		}
	}
	st, _ := client.OpenStream(7)
	rawWrite(t, st, wire.PPIDSegment, wire.SegmentChunk{SSN: 0, Segment: make([]byte, 18)}.Append(nil))
	expectTerminate(st)
	// One request may wait; the second is refused.
	st1, _ := client.OpenStream(8)
	st1.WriteSessionControl(testCtx(t), wire.SessionControl{Function: wire.FunctionInitiate})
	if !waitFor(5*time.Second, func() bool {
		sa.mu.Lock()
		defer sa.mu.Unlock()
		return len(sa.queue) == 1
	}) {
		t.Fatal("the first Initiate is not waiting for Accept")
	}
	st2, _ := client.OpenStream(9)
	st2.WriteSessionControl(testCtx(t), wire.SessionControl{Function: wire.FunctionInitiate})
	expectTerminate(st2)
}

// Losing the association flushes every stream's work requests.
func TestAssociationLossFlushes(t *testing.T) {
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	sa := server.Sessions(0)
	a, b := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, sa, 1, a, b)
	rbuf := b.Reg(t, 64, rdmap.LocalWrite)
	for i := 0; i < 3; i++ {
		b.QP.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: rbuf, Length: 64}}})
	}
	client.Close()
	server.Close()
	for i := 0; i < 3; i++ {
		if c := waitC(t, b.RCQ); c.WRID != uint64(i) || c.Status != rdmap.StatusWRFlushErr {
			t.Fatalf("%+v", c)
		}
	}
	if b.QP.State() != rdmap.StateTerminating {
		t.Fatal(b.QP.State())
	}
}

// An RDMA Write to an STag the responder does not have: the responder
// sends the RDMAP Terminate, a DDP Segment (PPID 16), and then the DDP
// Stream Session Terminate (PPID 17) after it in DDP-SSN order. (RFC 5043
// §11.3: "Other RDMAP-defined Terminate Messages MUST be generated as
// specified when a DDP stream is terminated."; §6.2: the DDP Stream
// Terminate "would follow any RDMAP Terminate message".)
func TestRDMAPTerminateBeforeSessionTerminate(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	sniff := make(chan *sniffConn, 1)
	srv.connHook = func(c net.Conn) net.Conn {
		s := &sniffConn{Conn: c}
		sniff <- s
		return s
	}
	server, client := connect(t, srv, cli)
	sn := <-sniff
	a, b := newPeer(t, nil), newPeer(t, nil)
	sessionPair(t, server, client, server.Sessions(0), 1, a, b)
	src := a.Reg(t, 64, 0)
	bogus := b.Reg(t, 64, rdmap.RemoteWrite).STag() ^ 0xffff00
	if err := a.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 64}}, RemoteSTag: bogus}); err != nil {
		t.Fatal(err)
	}
	// The responder's session ends after its queue pair has sent the
	// RDMAP Terminate.
	sessionTerminated := func() bool {
		sn.mu.Lock()
		defer sn.mu.Unlock()
		for _, c := range sn.chunks {
			if c.sid == 1 && wire.PPID(c.ppid) == wire.PPIDSessionControl && len(c.data) >= 4 &&
				wire.FunctionCode(binary.BigEndian.Uint16(c.data[2:])) == wire.FunctionTerminate {
				return true
			}
		}
		return false
	}
	if !waitFor(5*time.Second, sessionTerminated) {
		t.Fatal("the responder sent no DDP Stream Session Terminate")
	}
	var rdmapTerm, sessionTerm wire.SSN
	var haveRDMAP, haveSession bool
	sn.mu.Lock()
	defer sn.mu.Unlock()
	for _, c := range sn.chunks {
		if c.sid != 1 {
			continue
		}
		switch wire.PPID(c.ppid) {
		case wire.PPIDSegment:
			sc, _, err := wire.ParseSegmentChunk(c.data)
			if err != nil {
				t.Fatal(err)
			}
			h, n, err := ddp.ParseHeader(sc.Segment)
			if err != nil || h.Tagged || h.QN != rdmap.QNTerminate || rdmap.Control(h.RsvdULP[0]).Opcode() != rdmap.OpTerminate {
				continue
			}
			th, _, err := rdmap.ParseTerminate(sc.Segment[n:])
			if err != nil || th.Layer != term.LayerDDP {
				t.Fatalf("RDMAP Terminate %+v, %v", th, err)
			}
			rdmapTerm, haveRDMAP = sc.SSN, true
		case wire.PPIDSessionControl:
			m, _, err := wire.ParseSessionControl(c.data)
			if err == nil && m.Function == wire.FunctionTerminate {
				sessionTerm, haveSession = m.SSN, true
			}
		}
	}
	if !haveRDMAP || !haveSession || !rdmapTerm.Less(sessionTerm) {
		t.Fatalf("RDMAP Terminate sent %v, at DDP-SSN %d; DDP Stream Session Terminate sent %v, at %d", haveRDMAP, rdmapTerm, haveSession, sessionTerm)
	}
}
