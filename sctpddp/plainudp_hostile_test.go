//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/sctpddp/sctp"
	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// sctpPacket builds an SCTP packet from port 5000 to 5000 with the
// CRC32c.
func sctpPacket(vtag uint32, chunks ...[]byte) []byte {
	var b chunk.Builder
	b.Start(nil, 5000, 5000, vtag)
	for _, c := range chunks {
		b.Buf = append(b.Buf, c...)
	}
	return bytes.Clone(b.Finish())
}

func initChunk(tag uint32) []byte {
	return chunk.Init{
		InitiateTag: tag, ARwnd: 1 << 16, NumOutboundStreams: 8, NumInboundStreams: 8, InitialTSN: tag,
		Params: chunk.AdaptationLayerIndication{AdaptationCodePoint: chunk.AdaptationCodePointDDP}.Append(nil),
	}.Append(nil)
}

func ootbData() []byte {
	return chunk.Data{Flags: chunk.DataFlags(3), TSN: 7, PPID: 16, UserData: []byte("out of the blue")}.Append(nil)
}

// rawPeer is a UDP socket that speaks SCTP packet by packet to a
// Listener.
type rawPeer struct {
	t *testing.T
	c *net.UDPConn
}

func newRawPeer(t *testing.T, l *Listener) *rawPeer {
	t.Helper()
	c, err := net.DialUDP("udp", nil, l.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawPeer{t, c}
}

func (p *rawPeer) send(pkt []byte) {
	p.t.Helper()
	if _, err := p.c.Write(pkt); err != nil {
		p.t.Fatal(err)
	}
}

// reply returns the next packet from the Listener within wait, or nil.
func (p *rawPeer) reply(wait time.Duration) []byte {
	b := make([]byte, 2048)
	_ = p.c.SetReadDeadline(time.Now().Add(wait))
	n, err := p.c.Read(b)
	if err != nil {
		return nil
	}
	return b[:n]
}

func (p *rawPeer) addr() netip.AddrPort { return addrPortOf(p.c.LocalAddr()) }

// firstChunk returns the packet's first chunk, or nil.
func firstChunk(pkt []byte) chunk.Raw {
	it := chunk.Chunks(pkt)
	if !it.Next() {
		return nil
	}
	return it.Chunk()
}

// TestPlainUDPOutOfTheBlue sends a plain-UDP Listener the packets of RFC
// 9260 §8.4 from an address without an association and checks each
// answer, and that none of them leaves anything behind.
func TestPlainUDPOutOfTheBlue(t *testing.T) {
	checkGoroutines(t)
	srv, _ := plainConfigs()
	l, err := Listen(testCtx(t), "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := newRawPeer(t, l)
	const quiet = 150 * time.Millisecond

	// 8): DATA is answered with an ABORT, T bit set, the tag reflected.
	p.send(sctpPacket(0x12345678, ootbData()))
	r := p.reply(time.Second)
	if c := firstChunk(r); c == nil || c.Type() != chunk.TypeAbort || c.Flags()&1 == 0 || chunk.Header(r).VerificationTag() != 0x12345678 || chunk.VerifyChecksum(r) != nil {
		t.Fatalf("DATA out of the blue: answered % x", r)
	}
	// 5): SHUTDOWN ACK is answered with SHUTDOWN COMPLETE, T bit set.
	p.send(sctpPacket(0x0badcafe, chunk.ShutdownAck{}.Append(nil)))
	r = p.reply(time.Second)
	if c := firstChunk(r); c == nil || c.Type() != chunk.TypeShutdownComplete || c.Flags()&1 == 0 || chunk.Header(r).VerificationTag() != 0x0badcafe {
		t.Fatalf("SHUTDOWN ACK out of the blue: answered % x", r)
	}
	// 2), 6), 7): ABORT (whatever its tag), SHUTDOWN COMPLETE, COOKIE
	// ACK and a Stale Cookie ERROR are discarded; so are a packet with a
	// wrong CRC32c, one with a zero Checksum (§6.8) and one whose chunk
	// is malformed.
	bad := sctpPacket(1, ootbData())
	bad[len(bad)-1] ^= 1
	zero := sctpPacket(1, ootbData())
	binary.LittleEndian.PutUint32(zero[8:], 0)
	for name, pkt := range map[string][]byte{
		"ABORT":             sctpPacket(0xdeadbeef, chunk.Abort{}.Append(nil)),
		"DATA then ABORT":   sctpPacket(0xdeadbeef, ootbData(), chunk.Abort{T: true}.Append(nil)),
		"SHUTDOWN COMPLETE": sctpPacket(5, chunk.ShutdownComplete{}.Append(nil)),
		"COOKIE ACK":        sctpPacket(5, chunk.CookieAck{}.Append(nil)),
		"Stale Cookie":      sctpPacket(5, chunk.OperationError{Causes: chunk.StaleCookie{Staleness: 9}.Append(nil)}.Append(nil)),
		"bad CRC32c":        bad,
		"zero Checksum":     zero,
		"malformed chunk":   sctpPacket(5, []byte{0, 0, 0, 2}),
	} {
		p.send(pkt)
		if r := p.reply(quiet); r != nil {
			t.Errorf("%s out of the blue: answered % x", name, r)
		}
	}
	if n := l.plain.badChecksum.Load(); n != 3 {
		t.Errorf("%d packets failed the CRC32c or were malformed, want 3", n)
	}

	// §5.1: an INIT gets an INIT ACK with the State Cookie and the
	// Adaptation Layer Indication; nothing is kept.
	p.send(sctpPacket(0, initChunk(0x01020304)))
	initAck := p.reply(time.Second)
	c := firstChunk(initAck)
	if c == nil || c.Type() != chunk.TypeInitAck || chunk.Header(initAck).VerificationTag() != 0x01020304 || chunk.VerifyChecksum(initAck) != nil {
		t.Fatalf("INIT answered % x", initAck)
	}
	ia, _, err := chunk.ParseInitAck(c)
	if err != nil {
		t.Fatal(err)
	}
	var cookie []byte
	ps := chunk.Params(ia.Params)
	for ps.Next() {
		if ps.Param().Type() == chunk.ParamStateCookie {
			cookie = ps.Param().Value()
		}
	}
	echo := sctpPacket(ia.InitiateTag, chunk.CookieEcho{Cookie: cookie}.Append(nil))

	// The cookie opens only from the address its INIT ACK went to.
	other := newRawPeer(t, l)
	other.send(echo)
	if r := other.reply(quiet); r != nil {
		t.Errorf("the cookie echoed from another address: answered % x", r)
	}
	// A forged cookie (one bit of the MAC flipped) is discarded.
	forged := bytes.Clone(cookie)
	forged[len(forged)-1] ^= 1
	p.send(sctpPacket(ia.InitiateTag, chunk.CookieEcho{Cookie: forged}.Append(nil)))
	if r := p.reply(quiet); r != nil {
		t.Errorf("forged cookie: answered % x", r)
	}
	if n := l.plain.forged.Load(); n != 2 {
		t.Errorf("%d COOKIE ECHOs failed, want 2", n)
	}
	// An expired cookie of this address is answered with a Stale Cookie
	// ERROR (§5.1.5 step 4).
	keys := l.plain.bound(p.addr())
	old := sctp.StateCookie{
		LocalPort: 5000, PeerPort: 5000, LocalVerificationTag: 0x0a0b0c0d, PeerVerificationTag: 0x01020304,
		LocalInitialTSN: 1, PeerInitialTSN: 1, PeerARwnd: 1 << 16, LocalOS: 8, LocalMIS: 8, PeerOS: 8, PeerMIS: 8,
		Created: time.Now().Add(-2 * time.Minute), Lifespan: time.Minute,
	}
	p.send(sctpPacket(0x0a0b0c0d, chunk.CookieEcho{Cookie: old.Append(nil, &keys)}.Append(nil)))
	r = p.reply(time.Second)
	c = firstChunk(r)
	if c == nil || c.Type() != chunk.TypeError || chunk.Header(r).VerificationTag() != 0x01020304 {
		t.Fatalf("expired cookie: answered % x", r)
	}
	if cs := chunk.Causes(c.Value()); !cs.Next() || cs.Cause().Code() != chunk.CauseStaleCookie {
		t.Errorf("expired cookie: ERROR % x without a Stale Cookie cause", c)
	}
	if hs, conns := l.mux.counts(); hs != 0 || conns != 0 || l.mux.created.Load() != 0 {
		t.Errorf("the Listener holds %d handshakes and %d conns, created %d", hs, conns, l.mux.created.Load())
	}

	// The genuine COOKIE ECHO, from its address, starts the association.
	p.send(echo)
	r = p.reply(time.Second)
	if c := firstChunk(r); c == nil || c.Type() != chunk.TypeCookieAck {
		t.Fatalf("genuine COOKIE ECHO: answered % x", r)
	}
	a, err := l.Accept(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// An ABORT with a wrong tag is discarded (§8.5.1 B): the association
	// answers a HEARTBEAT afterwards.
	p.send(sctpPacket(ia.InitiateTag^1, chunk.Abort{}.Append(nil)))
	p.send(sctpPacket(0x01020304^1, chunk.Abort{T: true}.Append(nil)))
	hb := chunk.Heartbeat{Info: []byte("still there?")}.Append(nil)
	p.send(sctpPacket(ia.InitiateTag, hb))
	for {
		r = p.reply(time.Second)
		if r == nil {
			t.Fatal("no HEARTBEAT ACK after ABORTs with wrong tags")
		}
		if c := firstChunk(r); c.Type() == chunk.TypeHeartbeatAck {
			break
		}
	}
	if a.Err() != nil {
		t.Fatalf("association ended: %v", a.Err())
	}
	_ = a.Close()

	// §8.4's answers are rate-limited: a burst of OOTB DATA from
	// another address gets at most plainRepliesBurst ABORTs and a few.
	q := newRawPeer(t, l)
	before := l.plain.replies.Load()
	start := time.Now()
	for range 200 {
		q.send(sctpPacket(0x77, ootbData()))
	}
	time.Sleep(quiet)
	sent := l.plain.replies.Load() - before
	limit := uint64(plainRepliesBurst + plainRepliesPerSecond*time.Since(start).Seconds() + 1)
	if sent > limit || l.plain.withheld.Load() == 0 {
		t.Errorf("200 OOTB packets: %d ABORTs, %d withheld, want at most %d", sent, l.plain.withheld.Load(), limit)
	}
}

// connectTo dials l with cli and returns both ends.
func connectTo(t *testing.T, l *Listener, cli *Config) (server, client *Association) {
	t.Helper()
	ctx := testCtx(t)
	ch := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		ch <- a
	}()
	client, err := Dial(ctx, "udp", l.Addr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server = <-ch
	if server == nil {
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() { _ = server.Close() })
	return server, client
}

// TestPlainUDPFlood floods a plain-UDP Listener with INITs and forged
// COOKIE ECHOs from several addresses while a well-behaved peer
// associates and runs a DDP Stream Session beside them: the peer
// completes, the Listener creates one conn only (the peer's), its
// goroutines and heap are as before, and answering the flood allocates
// nothing (its cost is hashing).
func TestPlainUDPFlood(t *testing.T) {
	checkGoroutines(t)
	srv, cli := plainConfigs()
	l, err := Listen(testCtx(t), "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse

	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent atomic.Uint64
	for i := range 4 {
		p := newRawPeer(t, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cookie := make([]byte, sctp.CookieLen)
			_, _ = rand.Read(cookie)
			initPkt := sctpPacket(0, initChunk(uint32(0x100+i)))
			echo := sctpPacket(0x55, chunk.CookieEcho{Cookie: cookie}.Append(nil))
			for !stop.Load() {
				_, _ = p.c.Write(initPkt)
				_, _ = p.c.Write(echo)
				// About 8000 packets a second from each address, 32000
				// in all: a flood that keeps the read loop busy but
				// leaves the two shared cores to the peer too.
				if sent.Add(2)%8 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	goroutinesFlooding := runtime.NumGoroutine()
	// The flood is at full strength once thousands of its packets are out
	// and the listener answers them.
	waitfor.True(t, 10*time.Second, func() bool {
		return sent.Load() >= 8000 && l.plain.initAcks.Load() >= 100 && l.plain.forged.Load() >= 100
	}, "the flood of %d packets got %d INIT ACKs, %d forged COOKIE ECHOs discarded", sent.Load(), l.plain.initAcks.Load(), l.plain.forged.Load())

	server, client := connectTo(t, l, cli)
	a, b := newPeer(t, nil), newPeer(t, nil)
	cs, _ := sessionPair(t, server, client, server.Sessions(0), 1, a, b)
	if cs == nil {
		t.Fatal("no session")
	}
	stop.Store(true)
	wg.Wait()
	if n := runtime.NumGoroutine(); n > goroutinesFlooding+40 {
		t.Errorf("%d goroutines with the association, %d flooding", n, goroutinesFlooding)
	}
	if got := l.mux.created.Load(); got != 1 {
		t.Errorf("the Listener created %d conns, want the peer's alone", got)
	}
	initAcks, forged := l.plain.initAcks.Load(), l.plain.forged.Load()
	if initAcks < 100 || forged < 100 {
		t.Errorf("the flood of %d packets got %d INIT ACKs, %d forged COOKIE ECHOs discarded", sent.Load(), initAcks, forged)
	}
	t.Logf("flood: %d packets sent, %d INIT ACKs, %d forged COOKIE ECHOs", sent.Load(), initAcks, forged)
	_ = client.Close()
	_ = server.Close()
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grown := int64(ms.HeapInuse) - int64(heapBefore); grown > 16<<20 {
		t.Errorf("the heap grew by %d bytes", grown)
	}

	// Answering an INIT or a forged COOKIE ECHO allocates nothing.
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	pl := &plainListener{l: l, conn: uc, hs: l.plain.hs, keys: l.plain.keys, rotated: time.Now(), buf: make([]byte, 0, 1500)}
	to := addrPortOf(uc.LocalAddr())
	initPkt := sctpPacket(0, initChunk(0x99))
	echo := sctpPacket(0x55, chunk.CookieEcho{Cookie: make([]byte, sctp.CookieLen)}.Append(nil))
	if n := testing.AllocsPerRun(200, func() { pl.handle(nil, to, initPkt) }); n != 0 {
		t.Errorf("an INIT costs %v allocations", n)
	}
	if n := testing.AllocsPerRun(200, func() { pl.handle(nil, to, echo) }); n != 0 {
		t.Errorf("a forged COOKIE ECHO costs %v allocations", n)
	}
	if pl.initAcks.Load() < 200 || pl.forged.Load() < 200 {
		t.Errorf("%d INIT ACKs, %d forged", pl.initAcks.Load(), pl.forged.Load())
	}
}

// BenchmarkPlainUDPStateless measures what a plain-UDP Listener spends on
// a packet of a flood: answering an INIT (a State Cookie's HMAC, the
// keys bound to the address, an INIT ACK sent) and discarding a forged
// COOKIE ECHO (the bound keys and the MAC's check).
func BenchmarkPlainUDPStateless(b *testing.B) {
	l, err := Listen(context.Background(), "udp", "127.0.0.1:0", &Config{InsecurePlainUDP: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer uc.Close()
	to := addrPortOf(uc.LocalAddr())
	for _, bc := range []struct {
		name string
		pkt  []byte
	}{
		{"INIT", sctpPacket(0, initChunk(0x99))},
		{"ForgedCookieEcho", sctpPacket(0x55, chunk.CookieEcho{Cookie: make([]byte, sctp.CookieLen)}.Append(nil))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl := &plainListener{l: l, conn: uc, hs: l.plain.hs, keys: l.plain.keys, rotated: time.Now(), buf: make([]byte, 0, 1500)}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.pkt)))
			for b.Loop() {
				pl.handle(nil, to, bc.pkt)
			}
		})
	}
}

// TestPlainUDPAssociationLimit checks that a plain-UDP Listener applies
// MaxAssociationsPerPeer when a COOKIE ECHO authenticates: the peer's
// association beyond it is refused with an ABORT holding an Out of
// Resource cause (RFC 9260 §3.3.10.4), and Refused hears why; and that a
// closed Listener answers nothing.
func TestPlainUDPAssociationLimit(t *testing.T) {
	checkGoroutines(t)
	srv, cli := plainConfigs()
	srv.MaxAssociationsPerPeer = 1
	refused := make(chan error, 4)
	srv.Refused = func(_ net.Addr, why error) { refused <- why }
	l, err := Listen(testCtx(t), "udp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	connectTo(t, l, cli)
	_, err = Dial(testCtx(t), "udp", l.Addr().String(), cli)
	var ab *sctp.AbortError
	if !errors.As(err, &ab) || !ab.Remote || ab.Cause != chunk.CauseOutOfResource {
		t.Fatalf("second Dial: %v, want the peer's ABORT with Out of Resource", err)
	}
	if why := <-refused; !errors.Is(why, ErrTooManyAssociations) {
		t.Errorf("Refused heard %v", why)
	}
	if got := l.mux.created.Load(); got != 1 {
		t.Errorf("the Listener created %d conns", got)
	}
	_ = l.Close()
	p, err := net.DialUDP("udp", nil, l.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rp := &rawPeer{t, p}
	rp.send(sctpPacket(0, initChunk(0x42)))
	if r := rp.reply(150 * time.Millisecond); r != nil {
		t.Errorf("a closed Listener answered an INIT: % x", r)
	}
}
