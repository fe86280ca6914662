package sctp

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// maxInitAckLen bounds the packet HandleInit returns: the INIT ACK's
// fixed part and parameters, or an ABORT no larger than the INIT.
const maxInitAckLen = chunk.HeaderLen + 20 + 4 + CookieLen + 16 + maxReport

// initSeeds are INIT packets for the fuzz targets' corpora.
func initSeeds(t testing.TB) [][]byte {
	cfg := testConfig()
	cfg.ZeroChecksum = true
	w, _ := NewCookieWait(&cfg, testRand(5, 64))
	w.LifeSpanIncrement = 100
	return [][]byte{
		w.AppendInit(nil),
		initPacket(peerInit()),
		initPacket(peerInit(param(0xC042, 1), param(0x4042), aliDDP, zca)),
		initPacket(peerInit(param(chunk.ParamHostNameAddress, 'a', 0))),
		readHex(t, "chunk/testdata/linux_init.hex"),
		readHex(t, "chunk/testdata/linux_init_udp.hex")[8:],
	}
}

// FuzzHandleInit checks that HandleInit and HandleUnexpectedInit never
// panic, are pure functions of their inputs (RFC 9260 §5.1 B: the passive
// side keeps no state before the COOKIE ECHO), change none of them, and
// answer with a well-formed packet: an INIT ACK whose State Cookie opens
// to the INIT's values and the association's Tie-Tags, or an ABORT to the
// INIT's Initiate Tag.
func FuzzHandleInit(f *testing.F) {
	for _, s := range initSeeds(f) {
		f.Add(s)
	}
	keys := testKeys(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		cfg := testConfig()
		cfg.LocalPort = 0
		cfg.ZeroChecksum = len(pkt)%2 == 0
		// Which function: HandleInit, or HandleUnexpectedInit for an
		// association in COOKIE-WAIT or ESTABLISHED.
		var ex *ExistingAssociation
		switch len(pkt) % 3 {
		case 1:
			ex = &ExistingAssociation{Tags: AssociationTags{Local: 0x5555}, Initiating: true, LocalInitialTSN: 0x6666}
		case 2:
			ex = &ExistingAssociation{Tags: AssociationTags{Local: 0x01020304, Peer: 0x7777, LocalTie: 0x8888, PeerTie: 0x9999}}
		}
		handle := func(dst []byte) (InitResult, error) {
			if ex == nil {
				return HandleInit(dst, pkt, &cfg, &keys, testRand(1, 64), testNow)
			}
			return HandleUnexpectedInit(dst, pkt, &cfg, &keys, testRand(1, 64), testNow, ex)
		}
		cfgCopy, keysCopy, pktCopy := cfg, keys, bytes.Clone(pkt)
		var exCopy ExistingAssociation
		if ex != nil {
			exCopy = *ex
		}
		a, errA := handle(nil)
		b, errB := handle(make([]byte, 0, 64))
		if ex != nil && *ex != exCopy {
			t.Fatal("HandleUnexpectedInit changed the association")
		}
		if !bytes.Equal(a.Packet, b.Packet) || fmt.Sprint(errA) != fmt.Sprint(errB) ||
			a.Abort != b.Abort || a.PeerAdaptation != b.PeerAdaptation || a.Unrecognized != b.Unrecognized {
			t.Fatalf("two answers: %x %v / %x %v", a.Packet, errA, b.Packet, errB)
		}
		if !bytes.Equal(pkt, pktCopy) || cfg != cfgCopy || keys != keysCopy {
			t.Fatal("HandleInit changed its inputs")
		}
		if a.Packet == nil {
			if errA == nil {
				t.Fatal("no packet and no error")
			}
			return
		}
		if len(a.Packet) > maxInitAckLen {
			t.Fatalf("%d-byte answer", len(a.Packet))
		}
		p := parsePacket(t, a.Packet)
		init, _, err := chunk.ParseInit(pkt[chunk.HeaderLen:])
		if err != nil || len(p.chunks) != 1 || p.h.VerificationTag() != init.InitiateTag {
			t.Fatalf("answer %v to %#x for INIT %+v, %v", p.types(), p.h.VerificationTag(), init, err)
		}
		if a.Abort {
			if errA == nil || p.chunks[0].Type() != chunk.TypeAbort {
				t.Fatalf("Abort with %v, %v", p.types(), errA)
			}
			return
		}
		if errA != nil {
			t.Fatalf("INIT ACK with %v", errA)
		}
		_, ia := parseInitAck(t, a.Packet)
		// testRand(1, ...) starts with the tag 0x01020304: the
		// established association's, which a new tag must differ from.
		switch {
		case ex == nil:
		case ex.Initiating && (ia.InitiateTag != ex.Tags.Local || ia.InitialTSN != ex.LocalInitialTSN):
			t.Fatalf("collision INIT ACK %+v", ia)
		case !ex.Initiating && ia.InitiateTag == ex.Tags.Local:
			t.Fatalf("restart INIT ACK with the association's tag")
		}
		if ex != nil {
			c, err := OpenCookie(mustCookie(t, ia), &keys, testNow)
			if err != nil || c.LocalTieTag != ex.Tags.LocalTie || c.PeerTieTag != ex.Tags.PeerTie {
				t.Fatalf("cookie %+v, %v", c, err)
			}
		}
		echo := packet(p.h.DestinationPort(), p.h.SourcePort(), ia.InitiateTag, chunk.CookieEcho{Cookie: mustCookie(t, ia)}.Append(nil))
		_, est, err := HandleCookieEcho(nil, echo, &keys, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if est.PeerVerificationTag != init.InitiateTag || est.PeerInitialTSN != init.InitialTSN || est.PeerARwnd != init.ARwnd ||
			est.LocalVerificationTag != ia.InitiateTag || est.LocalInitialTSN != ia.InitialTSN ||
			est.OutboundStreams > init.NumInboundStreams || est.InboundStreams > init.NumOutboundStreams ||
			est.PeerAdaptation != a.PeerAdaptation || est.SendZeroChecksum != a.PeerZeroChecksum || est.ReceiveZeroChecksum != cfg.ZeroChecksum {
			t.Fatalf("established %+v from INIT %+v", est, init)
		}
	})
}

// FuzzHandleInitAck feeds the active side INIT ACKs: chunks after a
// common header with the right ports and Verification Tag. It never
// panics; its reply is a COOKIE ECHO, first, with the cookie it keeps, or
// an ABORT.
func FuzzHandleInitAck(f *testing.F) {
	keys := testKeys(f)
	cfg := testConfig()
	cfg.ZeroChecksum = true
	w, err := NewCookieWait(&cfg, testRand(0x30, 64))
	if err != nil {
		f.Fatal(err)
	}
	passive := HandshakeConfig{ARwnd: 1500, OutboundStreams: 1, InboundStreams: 1, ZeroChecksum: true}
	res, err := HandleInit(nil, w.AppendInit(nil), &passive, &keys, testRand(0x31, 64), testNow)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(res.Packet[chunk.HeaderLen:])
	f.Add(peerInitAck(w, param(0xC111, 1), param(0x4222), testStateCookie).Append(nil))
	f.Add(peerInitAck(w, testStateCookie, param(chunk.ParamHostNameAddress, 'a', 0)).Append(nil))
	f.Add(peerInitAck(w, aliDDP).Append(nil))
	f.Fuzz(func(t *testing.T, chunks []byte) {
		pkt := packet(cfg.PeerPort, cfg.LocalPort, w.LocalVerificationTag, chunks)
		wCopy := *w
		reply, e, err := w.HandleInitAck(nil, pkt)
		if *w != wCopy {
			t.Fatal("HandleInitAck changed the CookieWait")
		}
		if reply == nil {
			if err == nil || e != nil {
				t.Fatalf("no reply: %v, %v", err, e)
			}
			return
		}
		p := parsePacket(t, reply)
		if e == nil {
			if err == nil || len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeAbort {
				t.Fatalf("reply %v without state, %v", p.types(), err)
			}
			return
		}
		ce, _, cerr := chunk.ParseCookieEcho(p.chunks[0])
		if err != nil || cerr != nil || !bytes.Equal(ce.Cookie, e.Cookie) || p.h.VerificationTag() != e.Established.PeerVerificationTag ||
			len(p.chunks) > 2 || (len(p.chunks) == 2) != (e.Unrecognized > 0) {
			t.Fatalf("reply %v, %v, %v", p.types(), err, cerr)
		}
		if e.Established.OutboundStreams == 0 || e.Established.InboundStreams == 0 || e.Established.PeerARwnd < chunk.MinARwnd {
			t.Fatalf("established %+v", e.Established)
		}
		q := parsePacket(t, e.AppendCookieEcho(nil))
		if len(q.chunks) != 1 || !bytes.Equal(q.chunks[0], p.chunks[0]) {
			t.Fatalf("retransmission %v", q.types())
		}
	})
}

// FuzzHandleCookieEcho feeds the passive side COOKIE ECHO packets. It
// never panics, and accepts only cookies it made: an accepted cookie
// encodes again to the bytes received, and the reply goes to its peer's
// tag.
func FuzzHandleCookieEcho(f *testing.F) {
	keys := testKeys(f)
	cfg := testConfig()
	cfg.LocalPort = 0
	for _, s := range initSeeds(f) {
		res, err := HandleInit(nil, s, &cfg, &keys, testRand(2, 64), testNow)
		if err == nil {
			f.Add(cookieEchoFor(f, res.Packet), int64(0))
			f.Add(cookieEchoFor(f, res.Packet, chunk.CookieAck{}.Append(nil)), int64(time.Hour))
		}
	}
	f.Fuzz(func(t *testing.T, pkt []byte, later int64) {
		now := testNow.Add(time.Duration(later))
		reply, est, err := HandleCookieEcho(nil, pkt, &keys, now)
		if reply == nil {
			if err == nil {
				t.Fatal("no reply and no error")
			}
			return
		}
		p := parsePacket(t, reply)
		ce, _, cerr := chunk.ParseCookieEcho(pkt[chunk.HeaderLen:])
		if cerr != nil {
			t.Fatal(cerr)
		}
		c, oerr := OpenCookie(ce.Cookie, &keys, now)
		if oerr != nil && !errors.Is(oerr, ErrStaleCookie) {
			t.Fatalf("a reply for a cookie OpenCookie refuses: %v", oerr)
		}
		// The cookie is one this endpoint made: its fields encode to it.
		if again := c.Append(nil, &keys); !bytes.Equal(again, ce.Cookie) {
			t.Fatalf("accepted cookie %x encodes to %x", ce.Cookie, again)
		}
		if p.h.VerificationTag() != c.PeerVerificationTag || chunk.Header(pkt).VerificationTag() != c.LocalVerificationTag {
			t.Fatalf("reply to %#x for cookie %+v", p.h.VerificationTag(), c)
		}
		if err != nil {
			if !errors.Is(err, ErrStaleCookie) || p.chunks[0].Type() != chunk.TypeError {
				t.Fatalf("reply %v with %v", p.types(), err)
			}
			return
		}
		if p.chunks[0].Type() != chunk.TypeCookieAck || est != c.Established() {
			t.Fatalf("reply %v, established %+v", p.types(), est)
		}
	})
}
