package sctp

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// newTestCookieWait starts the active side at port 5000 toward 5001.
func newTestCookieWait(t testing.TB, cfg HandshakeConfig) *CookieWait {
	t.Helper()
	w, err := NewCookieWait(&cfg, testRand(0x10, 64))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestInit checks the INIT of the active side: RFC 9260 §5.1 A ("In the
// INIT chunk, "A" MUST provide its Verification Tag (Tag_A) in the
// Initiate Tag field"), §8.5.1 A ("The sender MUST set the Verification
// Tag of the packet to 0"), RFC 5043 §11.1 (the Adaptation Layer
// Indication) and RFC 8261 §6.1 ("The INIT and INIT-ACK chunk MUST NOT
// contain any IPv4 Address or IPv6 Address parameters. The INIT chunk MUST
// NOT contain the Supported Address Types parameter").
func TestInit(t *testing.T) {
	for _, tc := range []struct {
		zero bool
		inc  uint32
		want []chunk.ParamType
	}{
		{false, 0, []chunk.ParamType{chunk.ParamAdaptationLayerIndication}},
		{true, 0, []chunk.ParamType{chunk.ParamAdaptationLayerIndication, chunk.ParamZeroChecksumAcceptable}},
		{true, 800, []chunk.ParamType{chunk.ParamAdaptationLayerIndication, chunk.ParamZeroChecksumAcceptable, chunk.ParamCookiePreservative}},
	} {
		cfg := testConfig()
		cfg.ZeroChecksum = tc.zero
		cfg.AdaptationCodePoint = 0 // DDP's
		w := newTestCookieWait(t, cfg)
		w.LifeSpanIncrement = tc.inc
		p := parsePacket(t, w.AppendInit(nil))
		if len(p.chunks) != 1 || p.h.VerificationTag() != 0 || p.h.SourcePort() != 5000 || p.h.DestinationPort() != 5001 {
			t.Fatalf("INIT packet %v, header %x", p.types(), []byte(p.h[:8]))
		}
		i, _, err := chunk.ParseInit(p.chunks[0])
		if err != nil || i.Check() != nil {
			t.Fatal(err, i.Check())
		}
		if i.InitiateTag != w.LocalVerificationTag || i.InitialTSN != w.LocalInitialTSN || i.ARwnd != 65536 ||
			i.NumOutboundStreams != 16 || i.NumInboundStreams != 32 {
			t.Errorf("INIT %+v", i)
		}
		var types []chunk.ParamType
		for _, prm := range paramsOf(t, i.Params) {
			types = append(types, prm.Type())
			switch prm.Type() {
			case chunk.ParamAdaptationLayerIndication:
				if be32(prm.Value()) != chunk.AdaptationCodePointDDP {
					t.Errorf("code point %x", prm.Value())
				}
			case chunk.ParamCookiePreservative:
				if be32(prm.Value()) != tc.inc {
					t.Errorf("Cookie Preservative %x", prm.Value())
				}
			}
		}
		if !equalParamTypes(types, tc.want) {
			t.Errorf("parameters %v, want %v", types, tc.want)
		}
	}
}

// peerInitAck is an INIT ACK answering w's INIT.
func peerInitAck(w *CookieWait, params ...[]byte) chunk.InitAck {
	return chunk.InitAck{InitiateTag: 0xC1C2C3C4, ARwnd: 50000, NumOutboundStreams: 20, NumInboundStreams: 4,
		InitialTSN: 0xD1D2D3D4, Params: bytes.Join(params, nil)}
}

var testStateCookie = param(chunk.ParamStateCookie, []byte("a cookie of the peer's")...)

func initAckPacket(w *CookieWait, ia chunk.InitAck) []byte {
	return packet(5001, 5000, w.LocalVerificationTag, ia.Append(nil))
}

// TestInitAck checks HandleInitAck on a good INIT ACK (§5.1 C) and the
// COOKIE ECHO it returns.
func TestInitAck(t *testing.T) {
	cfg := testConfig()
	cfg.ZeroChecksum = true
	w := newTestCookieWait(t, cfg)
	pkt := initAckPacket(w, peerInitAck(w, testStateCookie, aliDDP, zca))
	echo, e, err := w.HandleInitAck(nil, pkt)
	if err != nil {
		t.Fatal(err)
	}
	// The cookie is copied: the packet's buffer may be reused.
	clear(pkt)
	p := parsePacket(t, echo)
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeCookieEcho {
		t.Fatalf("reply %v", p.types())
	}
	// §8.5.1 D: "When sending a COOKIE ECHO chunk, the endpoint MUST use
	// the value of the Initiate Tag received in the INIT ACK chunk." And
	// §3.3.11: "This field MUST contain the exact cookie received in the
	// State Cookie parameter from the previous INIT ACK chunk."
	ce, _, _ := chunk.ParseCookieEcho(p.chunks[0])
	if p.h.VerificationTag() != 0xC1C2C3C4 || !bytes.Equal(ce.Cookie, testStateCookie[4:4+22]) {
		t.Errorf("COOKIE ECHO to %#x, cookie %q", p.h.VerificationTag(), ce.Cookie)
	}
	want := Established{
		LocalPort: 5000, PeerPort: 5001,
		LocalVerificationTag: w.LocalVerificationTag, PeerVerificationTag: 0xC1C2C3C4,
		LocalInitialTSN: w.LocalInitialTSN, PeerInitialTSN: 0xD1D2D3D4,
		PeerARwnd:        50000,
		OutboundStreams:  4,  // §5.1.1: "the endpoint MUST use MIS outbound streams"
		InboundStreams:   20, // min(MIS 32, peer OS 20)
		PeerAdaptation:   Adaptation{Present: true, CodePoint: chunk.AdaptationCodePointDDP},
		SendZeroChecksum: true, ReceiveZeroChecksum: true,
	}
	if e.Established != want {
		t.Errorf("\n got %+v\nwant %+v", e.Established, want)
	}

	// §5.1 E: the COOKIE ACK establishes the association; chunks may
	// follow it ("A COOKIE ACK chunk MAY be bundled with any pending DATA
	// chunks (and/or SACK chunks)").
	sack := chunk.SACK{CumulativeTSNAck: w.LocalInitialTSN - 1, ARwnd: 50000}.Append(nil)
	for _, ack := range [][]byte{
		packet(5001, 5000, w.LocalVerificationTag, chunk.CookieAck{}.Append(nil)),
		packet(5001, 5000, w.LocalVerificationTag, chunk.CookieAck{}.Append(nil), sack),
	} {
		if est, err := e.HandleCookieAck(ack); err != nil || est != want {
			t.Errorf("COOKIE ACK: %v, %+v", err, est)
		}
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
		want error
	}{
		// §8.5: "If the received Verification Tag value does not match
		// the receiver's own tag value, the receiver MUST silently
		// discard the packet".
		{"Verification Tag", packet(5001, 5000, 0xC1C2C3C4, chunk.CookieAck{}.Append(nil)), ErrVerificationTag},
		{"port", packet(5002, 5000, w.LocalVerificationTag, chunk.CookieAck{}.Append(nil)), ErrPort},
		{"not first", packet(5001, 5000, w.LocalVerificationTag, sack, chunk.CookieAck{}.Append(nil)), ErrUnexpectedChunk},
		{"Length 8", packet(5001, 5000, w.LocalVerificationTag, []byte{11, 0, 0, 8, 0, 0, 0, 0}), chunk.ErrLength},
		{"empty", packet(5001, 5000, w.LocalVerificationTag), chunk.ErrTruncated},
	} {
		if _, err := e.HandleCookieAck(tc.pkt); !errors.Is(err, tc.want) {
			t.Errorf("COOKIE ACK %s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestInitAckIgnored checks the INIT ACKs that leave the endpoint in
// COOKIE-WAIT: no reply.
func TestInitAckIgnored(t *testing.T) {
	w := newTestCookieWait(t, testConfig())
	good := peerInitAck(w, testStateCookie).Append(nil)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want error
	}{
		{"Verification Tag", packet(5001, 5000, w.LocalVerificationTag+1, good), ErrVerificationTag},
		{"Verification Tag 0", packet(5001, 5000, 0, good), ErrVerificationTag},
		{"source port", packet(5002, 5000, w.LocalVerificationTag, good), ErrPort},
		{"destination port", packet(5001, 5003, w.LocalVerificationTag, good), ErrPort},
		// §5.1: "An INIT or INIT ACK chunk MUST NOT be bundled with any
		// other chunk. They MUST be the only chunks present in the SCTP
		// packets that carry them."
		{"bundled", packet(5001, 5000, w.LocalVerificationTag, good, chunk.CookieAck{}.Append(nil)), ErrBundled},
		{"not INIT ACK", packet(5001, 5000, w.LocalVerificationTag, chunk.CookieAck{}.Append(nil)), ErrUnexpectedChunk},
		{"malformed", packet(5001, 5000, w.LocalVerificationTag, peerInitAck(w, param(chunk.ParamAdaptationLayerIndication, 1)).Append(nil)), chunk.ErrLength},
		{"empty", packet(5001, 5000, w.LocalVerificationTag), chunk.ErrTruncated},
	} {
		reply, e, err := w.HandleInitAck(nil, tc.pkt)
		if reply != nil || e != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, reply %x; want %v", tc.name, err, reply, tc.want)
		}
	}
}

// TestInitAckAborted checks the INIT ACKs that HandleInitAck answers with
// an ABORT.
func TestInitAckAborted(t *testing.T) {
	w := newTestCookieWait(t, testConfig())
	hostName := param(chunk.ParamHostNameAddress, 'x', 0)
	for _, tc := range []struct {
		name   string
		ia     func(*chunk.InitAck)
		cfg    func(*HandshakeConfig)
		want   error
		vtag   uint32 // 0: the INIT ACK's Initiate Tag
		tbit   bool
		cause  chunk.CauseCode
		info   []byte
		params bool
	}{
		// §3.3.3: "If an endpoint in the COOKIE-WAIT state receives an
		// INIT ACK chunk with the Initiate Tag set to 0, it MUST destroy
		// the TCB and SHOULD send an ABORT chunk with the T bit set."
		{name: "Initiate Tag 0", ia: func(i *chunk.InitAck) { i.InitiateTag = 0 }, want: chunk.ErrZeroInitiateTag,
			vtag: w.LocalVerificationTag, tbit: true, cause: chunk.CauseInvalidMandatoryParameter},
		// "A receiver of an INIT ACK chunk with the a_rwnd value set to a
		// value smaller than 1500 MUST discard the packet, SHOULD send a
		// packet in response containing an ABORT chunk and using the
		// Initiate Tag as the Verification Tag".
		{name: "a_rwnd 0", ia: func(i *chunk.InitAck) { i.ARwnd = 0 }, want: chunk.ErrSmallARwnd, cause: chunk.CauseInvalidMandatoryParameter},
		// "If an endpoint in the COOKIE-WAIT state receives an INIT ACK
		// chunk with the OS value set to 0, it MUST destroy the TCB and
		// SHOULD send an ABORT chunk", and so for MIS.
		{name: "OS 0", ia: func(i *chunk.InitAck) { i.NumOutboundStreams = 0 }, want: chunk.ErrZeroStreams, cause: chunk.CauseInvalidMandatoryParameter},
		{name: "MIS 0", ia: func(i *chunk.InitAck) { i.NumInboundStreams = 0 }, want: chunk.ErrZeroStreams, cause: chunk.CauseInvalidMandatoryParameter},
		// §5.1: "If an endpoint receives an INIT, INIT ACK, or COOKIE
		// ECHO chunk but decides not to establish the new association
		// due to missing mandatory parameters ... It SHOULD also specify
		// the cause of abort, such as the type of the missing mandatory
		// parameters".
		{name: "no State Cookie", ia: func(i *chunk.InitAck) { i.Params = aliDDP }, want: chunk.ErrMissingStateCookie,
			cause: chunk.CauseMissingMandatoryParameter, info: []byte{0, 0, 0, 1, 0, 7}},
		// §3.3.3: "The receiver of INIT ACK chunks containing a Host Name
		// Address parameter MUST send an ABORT chunk and MAY include an
		// "Unresolvable Address" error cause."
		{name: "Host Name Address", ia: func(i *chunk.InitAck) { i.Params = append(bytes.Clone(testStateCookie), hostName...) },
			want: ErrHostNameAddress, cause: chunk.CauseUnresolvableAddress, info: hostName[:6]},
		{name: "DDP required", cfg: func(c *HandshakeConfig) { c.RequireDDP = true }, want: ErrPeerAdaptation,
			cause: chunk.CauseUserInitiatedAbort, info: []byte(adaptationReason)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			w := newTestCookieWait(t, cfg)
			ia := peerInitAck(w, testStateCookie)
			if tc.ia != nil {
				tc.ia(&ia)
			}
			reply, e, err := w.HandleInitAck(nil, initAckPacket(w, ia))
			if e != nil || !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			h, tbit, causes := parseAbort(t, reply)
			vtag := tc.vtag
			if vtag == 0 {
				vtag = ia.InitiateTag
			}
			if h.VerificationTag() != vtag || tbit != tc.tbit || h.SourcePort() != 5000 || h.DestinationPort() != 5001 {
				t.Errorf("ABORT header %x, T %v", []byte(h[:8]), tbit)
			}
			if len(causes) != 1 || causes[0].Code() != tc.cause || !bytes.Equal(causes[0].Info(), tc.info) {
				t.Errorf("causes %x, want %v %x", causes, tc.cause, tc.info)
			}
		})
	}
}

// TestInitAckUnrecognizedParameters checks §3.2.2 on an INIT ACK: "If the
// receiver of any other chunk (e.g., INIT ACK) detects unrecognized
// parameters and has to report them according to Section 3.2.1, it SHOULD
// bundle the ERROR chunk containing the "Unrecognized Parameters" error
// cause with the chunk sent in response (e.g., COOKIE ECHO)", and "Any
// time a COOKIE ECHO chunk is sent in a packet, it MUST be the first
// chunk"; and Table 3, whose 00 and 01 stop the processing of the
// parameters that follow, though the State Cookie, mandatory, is still
// echoed ("in all four cases, an INIT ACK or COOKIE ECHO chunk is sent in
// response").
func TestInitAckUnrecognizedParameters(t *testing.T) {
	u01 := param(0x4321, 1, 2, 3, 4, 5)
	u11 := param(0xC321, 9)
	u00 := param(0x0321)
	for _, tc := range []struct {
		name     string
		params   [][]byte
		reported []byte // the Unrecognized Parameters cause's information
		ddp      bool
	}{
		{"11 then 01", [][]byte{aliDDP, u11, u01, testStateCookie}, append(bytes.Clone(u11), u01...), true},
		{"01 first", [][]byte{u01, aliDDP, testStateCookie}, u01, false},
		{"00 first", [][]byte{u00, testStateCookie, aliDDP, u11}, nil, false},
		{"10", [][]byte{param(0x8321, 1), testStateCookie, aliDDP}, nil, true},
	} {
		w := newTestCookieWait(t, testConfig())
		reply, e, err := w.HandleInitAck(nil, initAckPacket(w, peerInitAck(w, tc.params...)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p := parsePacket(t, reply)
		if p.chunks[0].Type() != chunk.TypeCookieEcho {
			t.Fatalf("%s: chunks %v", tc.name, p.types())
		}
		if tc.reported == nil {
			if len(p.chunks) != 1 || e.Unrecognized != 0 {
				t.Errorf("%s: chunks %v", tc.name, p.types())
			}
		} else {
			if len(p.chunks) != 2 || p.chunks[1].Type() != chunk.TypeError {
				t.Fatalf("%s: chunks %v", tc.name, p.types())
			}
			oe, _, err := chunk.ParseOperationError(p.chunks[1])
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := chunk.ParseCause(oe.Causes)
			// §3.3.10.8: "The Unrecognized Parameters field contains the
			// unrecognized parameters copied from the INIT ACK chunk
			// complete with TLV."
			if c.Code() != chunk.CauseUnrecognizedParameters || !bytes.Equal(c.Info(), tc.reported) {
				t.Errorf("%s: cause %x, want information %x", tc.name, c, tc.reported)
			}
			// A retransmitted COOKIE ECHO goes alone.
			if q := parsePacket(t, e.AppendCookieEcho(nil)); len(q.chunks) != 1 {
				t.Errorf("%s: retransmission %v", tc.name, q.types())
			}
		}
		if e.Established.PeerAdaptation.DDP() != tc.ddp {
			t.Errorf("%s: adaptation %v", tc.name, e.Established.PeerAdaptation)
		}
	}
}

// TestStaleCookie runs §5.1.5 step 4 and §5.2.6 end to end: a COOKIE ECHO
// that comes back late gets an ERROR with a Stale Cookie cause, which the
// active side reads; a new INIT with a Cookie Preservative gets a cookie
// that lives long enough.
func TestStaleCookie(t *testing.T) {
	keys := testKeys(t)
	active := testConfig()
	passive := HandshakeConfig{LocalPort: 5001, ARwnd: 4096, OutboundStreams: 1, InboundStreams: 1, CookieLifetime: time.Second}
	w := newTestCookieWait(t, active)
	res, err := HandleInit(nil, w.AppendInit(nil), &passive, &keys, testRand(1, 64), testNow)
	if err != nil {
		t.Fatal(err)
	}
	echo, e, err := w.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatal(err)
	}
	reply, _, err := HandleCookieEcho(nil, echo, &keys, testNow.Add(1500*time.Millisecond))
	if !errors.Is(err, ErrStaleCookie) {
		t.Fatalf("%v, want stale", err)
	}
	staleness, ok := e.HandleStaleCookie(reply)
	if !ok || staleness != 500*time.Millisecond {
		t.Fatalf("HandleStaleCookie: %v, %v", staleness, ok)
	}
	if _, err := e.HandleCookieAck(reply); !errors.Is(err, ErrUnexpectedChunk) {
		t.Errorf("the ERROR as a COOKIE ACK: %v", err)
	}
	for _, bad := range [][]byte{withTag(reply, 1), withPorts(reply, 5002, 5000), reply[:8],
		packet(5001, 5000, w.LocalVerificationTag, chunk.OperationError{Causes: chunk.RawCause{Code: chunk.CauseOutOfResource}.Append(nil)}.Append(nil))} {
		if _, ok := e.HandleStaleCookie(bad); ok {
			t.Errorf("%x read as a Stale Cookie error", bad)
		}
	}

	// §5.2.6's third alternative.
	w2 := newTestCookieWait(t, active)
	w2.LifeSpanIncrement = uint32((staleness + 100*time.Millisecond) / time.Millisecond)
	res, err = HandleInit(nil, w2.AppendInit(nil), &passive, &keys, testRand(2, 64), testNow)
	if err != nil {
		t.Fatal(err)
	}
	echo, _, err = w2.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := HandleCookieEcho(nil, echo, &keys, testNow.Add(1500*time.Millisecond)); err != nil {
		t.Errorf("with a Cookie Preservative: %v", err)
	}
}
