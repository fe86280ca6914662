package sctp

import (
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// establish runs a handshake from a fresh CookieWait of active to a
// passive endpoint with keys, and returns both sides' associations.
func establish(t *testing.T, active, passive HandshakeConfig, keys *CookieKeys, seed byte) (*CookieWait, Established, Established) {
	t.Helper()
	w, err := NewCookieWait(&active, testRand(seed, 64))
	if err != nil {
		t.Fatal(err)
	}
	res, err := HandleInit(nil, w.AppendInit(nil), &passive, keys, testRand(seed+100, 64), testNow)
	if err != nil {
		t.Fatal(err)
	}
	echo, e, err := w.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatal(err)
	}
	ack, pEst, err := HandleCookieEcho(nil, echo, keys, testNow)
	if err != nil {
		t.Fatal(err)
	}
	aEst, err := e.HandleCookieAck(ack)
	if err != nil {
		t.Fatal(err)
	}
	return w, aEst, pEst
}

// TestRestart runs RFC 9260 §5.2.4.1's example (Figure 5): "A" restarts
// and sends a new INIT to "Z", which has the association still; "Z"
// answers with HandleUnexpectedInit ("find an existing TCB, populate
// TieTags if needed, compose Cookie_Z with Tie-Tags and other info"), and
// the COOKIE ECHO is action (A): "Tie-Tags in Cookie_Z match Tie-Tags in
// TCB, Tags do not match, i.e., case X X M M above, Announce Restart to
// ULP and reset association".
func TestRestart(t *testing.T) {
	keys := testKeys(t)
	aCfg := testConfig()
	zCfg := HandshakeConfig{LocalPort: 5001, ARwnd: 8192, OutboundStreams: 4, InboundStreams: 4}
	_, _, zEst := establish(t, aCfg, zCfg, &keys, 1)
	z := ExistingAssociation{Tags: AssociationTags{
		Local: zEst.LocalVerificationTag, Peer: zEst.PeerVerificationTag,
		LocalTie: 0x7171, PeerTie: 0x7272, // drawn by Z's association
	}}

	// A, restarted, knows nothing of the old association.
	w2, err := NewCookieWait(&aCfg, testRand(50, 64))
	if err != nil {
		t.Fatal(err)
	}
	// A random source that first repeats Z's current tag: §5.2.2 "MUST
	// contain a new Initiate Tag".
	r := &repeatThenCount{first: zEst.LocalVerificationTag, next: 9}
	res, err := HandleUnexpectedInit(nil, w2.AppendInit(nil), &zCfg, &keys, r, testNow, &z)
	if err != nil {
		t.Fatal(err)
	}
	// "The outbound SCTP packet containing this INIT ACK chunk MUST carry
	// a Verification Tag value equal to the Initiate Tag found in the
	// unexpected INIT chunk. And the INIT ACK chunk MUST contain a new
	// Initiate Tag".
	h, ia := parseInitAck(t, res.Packet)
	if h.VerificationTag() != w2.LocalVerificationTag || ia.InitiateTag == zEst.LocalVerificationTag || ia.InitiateTag == 0 {
		t.Fatalf("INIT ACK to %#x with Initiate Tag %#x (Z's tag %#x)", h.VerificationTag(), ia.InitiateTag, zEst.LocalVerificationTag)
	}
	echo, e, err := w2.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatal(err)
	}
	// HandleCookieEcho, for an endpoint with no association, would accept
	// it too; Z has one, so it decides by Table 12.
	c, err := OpenCookieEcho(echo, &keys, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.LocalTieTag != 0x7171 || c.PeerTieTag != 0x7272 {
		t.Errorf("Tie-Tags in the cookie %#x %#x", c.LocalTieTag, c.PeerTieTag)
	}
	if got := DecideCookieEcho(&c, false, z.Tags); got != CookieRestart {
		t.Fatalf("action %v, want restart", got)
	}
	zNew := c.Established()
	aNew, err := e.HandleCookieAck(c.AppendCookieAck(nil))
	if err != nil {
		t.Fatal(err)
	}
	if aNew.LocalVerificationTag != zNew.PeerVerificationTag || aNew.PeerVerificationTag != zNew.LocalVerificationTag ||
		aNew.LocalInitialTSN != zNew.PeerInitialTSN || aNew.PeerInitialTSN != zNew.LocalInitialTSN {
		t.Errorf("after the restart A has %+v, Z %+v", aNew, zNew)
	}

	// The old association's cookie, replayed late, is stale or matches
	// nothing; a restart cookie with tie-tags of another TCB is
	// discarded.
	if got := DecideCookieEcho(&c, false, AssociationTags{Local: z.Tags.Local, Peer: z.Tags.Peer, LocalTie: 1, PeerTie: 2}); got != CookieDiscard {
		t.Errorf("other Tie-Tags: %v", got)
	}
	if _, err := OpenCookieEcho(echo, &keys, testNow.Add(time.Hour)); !errors.Is(err, ErrStaleCookie) {
		t.Errorf("an hour later: %v", err)
	}
}

// repeatThenCount returns the 4 bytes of first, then bytes counting up.
type repeatThenCount struct {
	first uint32
	sent  int
	next  byte
}

func (r *repeatThenCount) Read(b []byte) (int, error) {
	for i := range b {
		if r.sent < 4 {
			b[i] = byte(r.first >> (24 - 8*r.sent))
			r.sent++
			continue
		}
		b[i] = r.next
		r.next++
	}
	return len(b), nil
}

// TestInitCollision runs §5.2.1: "A" and "Z" send their INITs at once.
// "A", in COOKIE-WAIT, answers Z's INIT "using the same parameters it sent
// in its original INIT chunk (including its Initiate Tag, unchanged)", Z
// echoes that cookie, and A, still in COOKIE-WAIT (Peer's Tag unknown),
// finds action (B): "M 0 A A", taking Z's tag from the cookie.
func TestInitCollision(t *testing.T) {
	keys := testKeys(t)
	aCfg := testConfig()
	zCfg := HandshakeConfig{LocalPort: 5001, PeerPort: 5000, ARwnd: 8192, OutboundStreams: 4, InboundStreams: 4}
	a, err := NewCookieWait(&aCfg, testRand(1, 64))
	if err != nil {
		t.Fatal(err)
	}
	z, err := NewCookieWait(&zCfg, testRand(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	zInit := z.AppendInit(nil)
	// A's INIT crosses Z's on the wire; A answers Z's.
	ex := ExistingAssociation{Tags: AssociationTags{Local: a.LocalVerificationTag}, Initiating: true, LocalInitialTSN: a.LocalInitialTSN}
	res, err := HandleUnexpectedInit(nil, zInit, &aCfg, &keys, &countingReader{}, testNow, &ex)
	if err != nil {
		t.Fatal(err)
	}
	h, ia := parseInitAck(t, res.Packet)
	if h.VerificationTag() != z.LocalVerificationTag || ia.InitiateTag != a.LocalVerificationTag || ia.InitialTSN != a.LocalInitialTSN {
		t.Fatalf("INIT ACK to %#x: %+v", h.VerificationTag(), ia)
	}
	echo, ze, err := z.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenCookieEcho(echo, &keys, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got := DecideCookieEcho(&c, false, ex.Tags); got != CookieCollision {
		t.Fatalf("action %v, want collision", got)
	}
	aEst := c.Established()
	zEst, err := ze.HandleCookieAck(c.AppendCookieAck(nil))
	if err != nil {
		t.Fatal(err)
	}
	if aEst.LocalVerificationTag != a.LocalVerificationTag || aEst.PeerVerificationTag != z.LocalVerificationTag ||
		zEst.PeerVerificationTag != a.LocalVerificationTag || aEst.LocalInitialTSN != zEst.PeerInitialTSN ||
		aEst.PeerInitialTSN != zEst.LocalInitialTSN {
		t.Errorf("A %+v, Z %+v", aEst, zEst)
	}
	// Had A reached ESTABLISHED with Z's tag by then, the same cookie is
	// action (D), a duplicate.
	if got := DecideCookieEcho(&c, true, AssociationTags{Local: a.LocalVerificationTag, Peer: z.LocalVerificationTag}); got != CookieDuplicate {
		t.Errorf("established: %v", got)
	}
	// ExistingAssociation without a tag is refused.
	if _, err := HandleUnexpectedInit(nil, zInit, &aCfg, &keys, &countingReader{}, testNow, &ExistingAssociation{}); err == nil {
		t.Error("no tag accepted")
	}
}

func TestStaleCookieErrorPacket(t *testing.T) {
	c := testCookie()
	p := parsePacket(t, c.AppendStaleCookieError(nil, 77))
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeError || p.h.VerificationTag() != c.PeerVerificationTag ||
		p.h.SourcePort() != c.LocalPort || p.h.DestinationPort() != c.PeerPort {
		t.Fatalf("%v to %x", p.types(), []byte(p.h[:8]))
	}
	oe, _, _ := chunk.ParseOperationError(p.chunks[0])
	if sc, _, err := chunk.ParseStaleCookie(oe.Causes); err != nil || sc.Staleness != 77 {
		t.Errorf("%+v %v", sc, err)
	}
}
