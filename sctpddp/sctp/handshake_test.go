package sctp

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// TestHandshake runs the four-way handshake of RFC 9260 §5.1 between the
// active and the passive side of this package.
func TestHandshake(t *testing.T) {
	keys := testKeys(t)
	active := testConfig()
	active.ZeroChecksum = true
	passive := HandshakeConfig{LocalPort: 5001, ARwnd: 4096, OutboundStreams: 40, InboundStreams: 12}

	w, err := NewCookieWait(&active, testRand(1, 64))
	if err != nil {
		t.Fatal(err)
	}
	initPkt := w.AppendInit(nil)
	res, err := HandleInit(nil, initPkt, &passive, &keys, testRand(100, 64), testNow)
	if err != nil || res.Abort {
		t.Fatalf("HandleInit: %v, %+v", err, res)
	}
	if !res.PeerAdaptation.DDP() || !res.PeerZeroChecksum || res.Unrecognized != 0 {
		t.Errorf("HandleInit result %+v", res)
	}
	echo, e, err := w.HandleInitAck(nil, res.Packet)
	if err != nil {
		t.Fatalf("HandleInitAck: %v", err)
	}
	if p := parsePacket(t, echo); len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeCookieEcho {
		t.Fatalf("COOKIE ECHO packet %v", p.types())
	}
	if again := e.AppendCookieEcho(nil); !bytes.Equal(again, echo) {
		t.Errorf("retransmitted COOKIE ECHO\n%x\nfirst\n%x", again, echo)
	}
	ack, est, err := HandleCookieEcho(nil, echo, &keys, testNow.Add(time.Second))
	if err != nil {
		t.Fatalf("HandleCookieEcho: %v", err)
	}
	activeEst, err := e.HandleCookieAck(ack)
	if err != nil {
		t.Fatalf("HandleCookieAck: %v", err)
	}

	want := Established{
		LocalPort: 5000, PeerPort: 5001,
		LocalVerificationTag: w.LocalVerificationTag, PeerVerificationTag: est.LocalVerificationTag,
		LocalInitialTSN: w.LocalInitialTSN, PeerInitialTSN: est.LocalInitialTSN,
		PeerARwnd:       4096,
		OutboundStreams: 12, // min(OS 16, peer MIS 12)
		InboundStreams:  32, // min(MIS 32, peer OS 40)
		PeerAdaptation:  Adaptation{Present: true, CodePoint: chunk.AdaptationCodePointDDP},
		// The passive side did not announce Zero Checksum Acceptable.
		ReceiveZeroChecksum: true,
	}
	if activeEst != want {
		t.Errorf("active side\n got %+v\nwant %+v", activeEst, want)
	}
	mirror := Established{
		LocalPort: 5001, PeerPort: 5000,
		LocalVerificationTag: activeEst.PeerVerificationTag, PeerVerificationTag: activeEst.LocalVerificationTag,
		LocalInitialTSN: activeEst.PeerInitialTSN, PeerInitialTSN: activeEst.LocalInitialTSN,
		PeerARwnd:        65536,
		OutboundStreams:  32, // min(OS 40 held to the INIT's MIS 32, peer MIS 32)
		InboundStreams:   12, // min(MIS 12, peer OS 16)
		PeerAdaptation:   Adaptation{Present: true, CodePoint: chunk.AdaptationCodePointDDP},
		SendZeroChecksum: true,
	}
	if est != mirror {
		t.Errorf("passive side\n got %+v\nwant %+v", est, mirror)
	}
	if est.LocalVerificationTag == 0 || activeEst.LocalVerificationTag == 0 {
		t.Error("a Verification Tag is 0")
	}
}

// TestInitAckContents checks the INIT ACK HandleInit builds.
func TestInitAckContents(t *testing.T) {
	keys := testKeys(t)
	for _, zero := range []bool{false, true} {
		cfg := testConfig()
		cfg.ZeroChecksum = zero
		cfg.OutboundStreams = 100
		res, err := HandleInit(nil, initPacket(peerInit()), &cfg, &keys, testRand(7, 64), testNow)
		if err != nil {
			t.Fatal(err)
		}
		h, ia := parseInitAck(t, res.Packet)
		// §5.1 B: ""Z" MUST set the Verification Tag field to Tag_A and
		// also provide its own Verification Tag (Tag_Z) in the Initiate
		// Tag field."
		if h.VerificationTag() != 0xA1A2A3A4 || ia.InitiateTag == 0 || h.SourcePort() != 5000 || h.DestinationPort() != 5001 {
			t.Errorf("header %x, Initiate Tag %#x", []byte(h[:12]), ia.InitiateTag)
		}
		// §3.3.3: OS "MUST NOT be greater than the MIS value sent in the
		// INIT chunk".
		if ia.NumOutboundStreams != 10 || ia.NumInboundStreams != 32 || ia.ARwnd != 65536 {
			t.Errorf("INIT ACK fixed fields %+v", ia)
		}
		var types []chunk.ParamType
		for _, p := range paramsOf(t, ia.Params) {
			types = append(types, p.Type())
			switch p.Type() {
			case chunk.ParamStateCookie:
				if len(p.Value()) != CookieLen {
					t.Errorf("State Cookie of %d bytes", len(p.Value()))
				}
			case chunk.ParamAdaptationLayerIndication:
				// RFC 5043 §11.1: "a DDP/SCTP adaptation layer MUST
				// include an adaptation layer indication in its INIT or
				// INIT-ACK".
				if be32(p.Value()) != chunk.AdaptationCodePointDDP {
					t.Errorf("Adaptation Code Point %x", p.Value())
				}
			case chunk.ParamZeroChecksumAcceptable:
				if be32(p.Value()) != chunk.EDMIDDTLS {
					t.Errorf("EDMID %x", p.Value())
				}
			}
		}
		want := []chunk.ParamType{chunk.ParamStateCookie, chunk.ParamAdaptationLayerIndication}
		if zero {
			want = append(want, chunk.ParamZeroChecksumAcceptable)
		}
		if !equalParamTypes(types, want) {
			t.Errorf("ZeroChecksum %v: parameters %v, want %v", zero, types, want)
		}
	}
}

func equalParamTypes(a, b []chunk.ParamType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInitDiscarded checks the INITs HandleInit silently discards.
func TestInitDiscarded(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	good := peerInit().Append(nil)
	zeroTag := peerInit()
	zeroTag.InitiateTag = 0
	for _, tc := range []struct {
		name string
		pkt  []byte
		want error
	}{
		// §8.5.1 A: "The sender MUST set the Verification Tag of the
		// packet to 0."
		{"Verification Tag not 0", packet(5001, 5000, 1, good), ErrVerificationTag},
		// §6.10: "An endpoint MUST NOT bundle INIT, INIT ACK, or SHUTDOWN
		// COMPLETE chunks with any other chunks."
		{"bundled after", packet(5001, 5000, 0, good, chunk.CookieAck{}.Append(nil)), ErrBundled},
		{"bundled twice", packet(5001, 5000, 0, good, good), ErrBundled},
		{"bundled before", packet(5001, 5000, 0, chunk.CookieAck{}.Append(nil), good), ErrUnexpectedChunk},
		{"bundled with a malformed chunk", append(packet(5001, 5000, 0, good), 0, 0, 0, 1), ErrBundled},
		// §3.3.2: "If the value of the Initiate Tag in a received INIT
		// chunk is found to be 0, the receiver MUST silently discard the
		// packet."
		{"Initiate Tag 0", initPacket(zeroTag), chunk.ErrZeroInitiateTag},
		// §3.1: "The port number 0 MUST NOT be used."
		{"source port 0", packet(0, 5000, 0, good), ErrPort},
		{"destination port 0", packet(5001, 0, 0, good), ErrPort},
		{"another port", packet(5001, 5002, 0, good), ErrPort},
		{"malformed parameter", packet(5001, 5000, 0, peerInit(param(chunk.ParamIPv4Address, 1, 2)).Append(nil)), chunk.ErrLength},
		{"no chunk", packet(5001, 5000, 0), chunk.ErrTruncated},
		{"short", []byte{1, 2, 3}, chunk.ErrTruncated},
	} {
		res, err := HandleInit(nil, tc.pkt, &cfg, &keys, testRand(0, 64), testNow)
		if res.Packet != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, packet %x; want no packet and %v", tc.name, err, res.Packet, tc.want)
		}
	}
}

// TestInitAborted checks the INITs HandleInit answers with an ABORT.
func TestInitAborted(t *testing.T) {
	keys := testKeys(t)
	hostName := param(chunk.ParamHostNameAddress, 'h', 'o', 's', 't', 0)
	for _, tc := range []struct {
		name  string
		init  func(*chunk.Init)
		cfg   func(*HandshakeConfig)
		want  error
		cause chunk.CauseCode
		info  []byte
	}{
		// §3.3.2: "A receiver of an INIT chunk with the a_rwnd value set
		// to a value smaller than 1500 MUST discard the packet, SHOULD
		// send a packet in response containing an ABORT chunk and using
		// the Initiate Tag as the Verification Tag".
		{"a_rwnd 1499", func(i *chunk.Init) { i.ARwnd = 1499 }, nil, chunk.ErrSmallARwnd, chunk.CauseInvalidMandatoryParameter, nil},
		// "A receiver of an INIT chunk with the OS value set to 0 MUST
		// discard the packet, SHOULD send a packet in response containing
		// an ABORT chunk", and so for MIS.
		{"OS 0", func(i *chunk.Init) { i.NumOutboundStreams = 0 }, nil, chunk.ErrZeroStreams, chunk.CauseInvalidMandatoryParameter, nil},
		{"MIS 0", func(i *chunk.Init) { i.NumInboundStreams = 0 }, nil, chunk.ErrZeroStreams, chunk.CauseInvalidMandatoryParameter, nil},
		// §5.1.2 B: "If there is a Host Name Address parameter present in
		// the received INIT or INIT ACK chunk, the endpoint MUST
		// immediately send an ABORT chunk and MAY include an
		// "Unresolvable Address" error cause to its peer."
		{"Host Name Address", func(i *chunk.Init) { i.Params = append(append([]byte{}, aliDDP...), hostName...) }, nil,
			ErrHostNameAddress, chunk.CauseUnresolvableAddress, []byte{0, 11, 0, 9, 'h', 'o', 's', 't', 0}},
		// RFC 5043 §7.1: "it SHOULD terminate all requests to establish an
		// association with any different Adaptation Indication."
		{"no indication, DDP required", nil, func(c *HandshakeConfig) { c.RequireDDP = true },
			ErrPeerAdaptation, chunk.CauseUserInitiatedAbort, []byte(adaptationReason)},
		{"other indication, DDP required", func(i *chunk.Init) {
			i.Params = chunk.AdaptationLayerIndication{AdaptationCodePoint: 7}.Append(nil)
		}, func(c *HandshakeConfig) { c.RequireDDP = true }, ErrPeerAdaptation, chunk.CauseUserInitiatedAbort, []byte(adaptationReason)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := peerInit()
			if tc.init != nil {
				tc.init(&i)
			}
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			res, err := HandleInit(nil, initPacket(i), &cfg, &keys, testRand(0, 64), testNow)
			if !errors.Is(err, tc.want) || !res.Abort {
				t.Fatalf("%v, abort %v; want %v", err, res.Abort, tc.want)
			}
			h, tbit, causes := parseAbort(t, res.Packet)
			// §5.1: "The Verification Tag field in the common header of
			// the outbound SCTP packet containing the ABORT chunk MUST be
			// set to the Initiate Tag value of the received INIT".
			if h.VerificationTag() != i.InitiateTag || tbit || h.SourcePort() != 5000 || h.DestinationPort() != 5001 {
				t.Errorf("ABORT header %x, T %v", []byte(h[:8]), tbit)
			}
			if len(causes) != 1 || causes[0].Code() != tc.cause || !bytes.Equal(causes[0].Info(), tc.info) {
				t.Errorf("causes %x, want %v %x", causes, tc.cause, tc.info)
			}
		})
	}
	// With DDP's indication, RequireDDP accepts.
	cfg := testConfig()
	cfg.RequireDDP = true
	if res, err := HandleInit(nil, initPacket(peerInit(aliDDP)), &cfg, &keys, testRand(0, 64), testNow); err != nil || res.Abort {
		t.Errorf("DDP required, DDP sent: %v", err)
	}
}

// TestInitUnrecognizedParameters checks §3.2.1's Table 3 on an INIT:
// "00 Stop processing this parameter and do not process any further
// parameters within this chunk. 01 Stop processing this parameter, do not
// process any further parameters within this chunk, and report the
// unrecognized parameter ... 10 Skip this parameter and continue
// processing. 11 Skip this parameter and continue processing, but report
// the unrecognized parameter", and "when an INIT or INIT ACK chunk is
// received, in all four cases, an INIT ACK or COOKIE ECHO chunk is sent in
// response". §3.2.2: the receiver of an INIT "MUST put the "Unrecognized
// Parameter" parameter(s) in the INIT ACK chunk".
func TestInitUnrecognizedParameters(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	for _, tc := range []struct {
		typ       chunk.ParamType
		reported  bool
		processed bool // the Adaptation Layer Indication after it is read
	}{
		{0x0042, false, false},
		{0x4042, true, false},
		{0x8042, false, true},
		{0xC042, true, true},
		{chunk.ParamForwardTSNSupported, true, true}, // RFC 3758 is not implemented
		{chunk.ParamECNCapable, false, true},
		{chunk.ParamRandom, false, true},
	} {
		unknown := param(tc.typ, 1, 2, 3) // Length 7: padded
		if tc.typ == chunk.ParamForwardTSNSupported || tc.typ == chunk.ParamECNCapable {
			unknown = param(tc.typ) // Length 4, as their definitions have it
		}
		before := chunk.ZeroChecksumAcceptable{EDMID: chunk.EDMIDDTLS}.Append(nil)
		res, err := HandleInit(nil, initPacket(peerInit(before, unknown, aliDDP)), &cfg, &keys, testRand(0, 64), testNow)
		if err != nil {
			t.Fatalf("%v: %v", tc.typ, err)
		}
		_, ia := parseInitAck(t, res.Packet)
		var reports []chunk.Param
		for _, p := range paramsOf(t, ia.Params) {
			if p.Type() == chunk.ParamUnrecognizedParameter {
				reports = append(reports, p)
			}
		}
		if tc.reported {
			// §3.3.3.1.2: "The Parameter Value field will contain an
			// unrecognized parameter copied from the INIT chunk complete
			// with Parameter Type, Length, and Value fields."
			if len(reports) != 1 || !bytes.Equal(reports[0].Value(), unknown[:unknown[3]]) || res.Unrecognized != 1 {
				t.Errorf("%v: reports %x", tc.typ, reports)
			}
		} else if len(reports) != 0 || res.Unrecognized != 0 {
			t.Errorf("%v: reports %x, want none", tc.typ, reports)
		}
		// "no processing already done is rolled back"
		if !res.PeerZeroChecksum {
			t.Errorf("%v: the parameter before it was forgotten", tc.typ)
		}
		if res.PeerAdaptation.DDP() != tc.processed {
			t.Errorf("%v: adaptation %v, want processed %v", tc.typ, res.PeerAdaptation, tc.processed)
		}
		// The cookie carries what was processed.
		echo := packet(5001, 5000, ia.InitiateTag, chunk.CookieEcho{Cookie: mustCookie(t, ia)}.Append(nil))
		_, est, err := HandleCookieEcho(nil, echo, &keys, testNow)
		if err != nil || est.PeerAdaptation.DDP() != tc.processed || !est.SendZeroChecksum {
			t.Errorf("%v: COOKIE ECHO %v, %+v", tc.typ, err, est)
		}
	}
}

func mustCookie(t testing.TB, ia chunk.InitAck) []byte {
	t.Helper()
	c, ok := chunk.StateCookie(ia.Params)
	if !ok {
		t.Fatal("INIT ACK without State Cookie")
	}
	return c
}

// TestInitReportBound checks that an INIT of many unknown parameters does
// not make an INIT ACK beyond maxReport bytes of reports.
func TestInitReportBound(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	var ps [][]byte
	for range 3000 {
		ps = append(ps, param(0xC123))
	}
	i := peerInit(ps...)
	res, err := HandleInit(nil, initPacket(i), &cfg, &keys, testRand(0, 64), testNow)
	if err != nil {
		t.Fatal(err)
	}
	_, ia := parseInitAck(t, res.Packet)
	if res.Unrecognized != maxReport/8 || len(ia.Params) > 4+CookieLen+16+maxReport {
		t.Errorf("%d reported, %d bytes of parameters", res.Unrecognized, len(ia.Params))
	}
}

// TestInitAddresses checks that address parameters are accepted and
// ignored: RFC 8261 §8, "SCTP should not process the IP addresses used
// for the underlying communication since DTLS provides no guarantees
// about them", and that the INIT ACK lists none (§6.1: "The INIT and
// INIT-ACK chunk MUST NOT contain any IPv4 Address or IPv6 Address
// parameters").
func TestInitAddresses(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	v4 := chunk.IPv4Address{Addr: [4]byte{192, 0, 2, 1}}.Append(nil)
	v6 := chunk.IPv6Address{Addr: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}}.Append(nil)
	sat := chunk.SupportedAddressTypes{Types: chunk.ParamTypeList(nil).AppendType(chunk.ParamIPv6Address).AppendType(chunk.ParamHostNameAddress)}.Append(nil)
	res, err := HandleInit(nil, initPacket(peerInit(v4, v6, sat, aliDDP)), &cfg, &keys, testRand(0, 64), testNow)
	if err != nil || !res.PeerAdaptation.DDP() || res.Unrecognized != 0 {
		t.Fatalf("%v, %+v", err, res)
	}
	_, ia := parseInitAck(t, res.Packet)
	for _, p := range paramsOf(t, ia.Params) {
		switch p.Type() {
		case chunk.ParamIPv4Address, chunk.ParamIPv6Address, chunk.ParamSupportedAddressTypes:
			t.Errorf("INIT ACK with %v", p.Type())
		}
	}
}

// TestInitCookiePreservative checks §3.3.2.1.3: the parameter "indicates
// to the receiver how much increment in milliseconds the sender wishes
// the receiver to add to its default cookie life span", and "The receiver
// MAY choose to ignore the suggested cookie life span increase for its own
// security reasons."
func TestInitCookiePreservative(t *testing.T) {
	keys := testKeys(t)
	for _, tc := range []struct {
		life, maxInc time.Duration
		inc          uint32
		want         time.Duration
	}{
		{0, 0, 0, 60 * time.Second},
		{0, 0, 500, 60*time.Second + 500*time.Millisecond},
		{0, 0, 5000, 61 * time.Second}, // DefaultMaxLifeSpanIncrement
		{10 * time.Second, 3 * time.Second, 2500, 12500 * time.Millisecond},
		{10 * time.Second, -1, 2500, 10 * time.Second},
	} {
		cfg := testConfig()
		cfg.CookieLifetime, cfg.MaxLifeSpanIncrement = tc.life, tc.maxInc
		var ps [][]byte
		if tc.inc != 0 {
			ps = append(ps, chunk.CookiePreservative{LifeSpanIncrement: tc.inc}.Append(nil))
		}
		res, err := HandleInit(nil, initPacket(peerInit(ps...)), &cfg, &keys, testRand(0, 64), testNow)
		if err != nil {
			t.Fatal(err)
		}
		_, ia := parseInitAck(t, res.Packet)
		c, err := OpenCookie(mustCookie(t, ia), &keys, testNow)
		if err != nil || c.Lifespan != tc.want {
			t.Errorf("%+v: lifespan %v, %v", tc, c.Lifespan, err)
		}
	}
}

// TestInitPure checks that HandleInit keeps no state (§5.1 B: "Z" MUST
// NOT allocate any resources or keep any states for the new
// association): the same inputs give the same INIT ACK, and the inputs
// are left as they were.
func TestInitPure(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	pkt := initPacket(peerInit(aliDDP, param(0xC042, 9)))
	pktCopy, cfgCopy, keysCopy := bytes.Clone(pkt), cfg, keys
	a, errA := HandleInit(nil, pkt, &cfg, &keys, testRand(3, 64), testNow)
	for range 3 {
		HandleInit(nil, initPacket(peerInit()), &cfg, &keys, testRand(9, 64), testNow.Add(time.Hour))
	}
	b, errB := HandleInit(make([]byte, 0, 2048), pkt, &cfg, &keys, testRand(3, 64), testNow)
	if errA != nil || errB != nil || !bytes.Equal(a.Packet, b.Packet) {
		t.Errorf("two answers to one INIT:\n%x\n%x", a.Packet, b.Packet)
	}
	if !bytes.Equal(pkt, pktCopy) || cfg != cfgCopy || keys != keysCopy {
		t.Error("HandleInit changed its inputs")
	}
	// Another random source, another tag: nothing else decides it.
	c, _ := HandleInit(nil, pkt, &cfg, &keys, testRand(4, 64), testNow)
	if bytes.Equal(a.Packet, c.Packet) {
		t.Error("the random source is not used")
	}
}

func TestInitConfig(t *testing.T) {
	keys := testKeys(t)
	for _, cfg := range []HandshakeConfig{
		{ARwnd: 1499, OutboundStreams: 1, InboundStreams: 1},
		{ARwnd: 1500, InboundStreams: 1},
		{ARwnd: 1500, OutboundStreams: 1},
	} {
		if _, err := HandleInit(nil, initPacket(peerInit()), &cfg, &keys, testRand(0, 64), testNow); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
		if _, err := NewCookieWait(&cfg, testRand(0, 64)); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	cfg := testConfig()
	var none CookieKeys
	if _, err := HandleInit(nil, initPacket(peerInit()), &cfg, &none, testRand(0, 64), testNow); !errors.Is(err, ErrCookieKey) {
		t.Errorf("no key: %v", err)
	}
	if _, err := HandleInit(nil, initPacket(peerInit()), &cfg, &keys, bytes.NewReader(nil), testNow); err == nil {
		t.Error("no randomness")
	}
	if _, err := HandleInit(nil, initPacket(peerInit()), &cfg, &keys, bytes.NewReader(make([]byte, 64)), testNow); err == nil {
		t.Error("random source of zeros")
	}
	cfg.PeerPort = 0
	if _, err := NewCookieWait(&cfg, testRand(0, 64)); !errors.Is(err, ErrPort) {
		t.Errorf("no peer port: %v", err)
	}
}

// cookieEchoFor returns a COOKIE ECHO packet answering an INIT ACK.
func cookieEchoFor(t testing.TB, initAck []byte, extra ...[]byte) []byte {
	t.Helper()
	h, ia := parseInitAck(t, initAck)
	chunks := append([][]byte{chunk.CookieEcho{Cookie: mustCookie(t, ia)}.Append(nil)}, extra...)
	// §8.5.1 D: "When sending a COOKIE ECHO chunk, the endpoint MUST use
	// the value of the Initiate Tag received in the INIT ACK chunk."
	return packet(h.DestinationPort(), h.SourcePort(), ia.InitiateTag, chunks...)
}

// TestCookieEcho checks HandleCookieEcho against §5.1.5.
func TestCookieEcho(t *testing.T) {
	keys := testKeys(t)
	cfg := testConfig()
	res, err := HandleInit(nil, initPacket(peerInit(aliDDP)), &cfg, &keys, testRand(0, 64), testNow)
	if err != nil {
		t.Fatal(err)
	}
	echo := cookieEchoFor(t, res.Packet)

	// Step 5 and 6: the COOKIE ACK, to the peer's tag.
	reply, est, err := HandleCookieEcho(nil, echo, &keys, testNow.Add(59*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := parsePacket(t, reply)
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeCookieAck || p.h.VerificationTag() != 0xA1A2A3A4 ||
		p.h.SourcePort() != 5000 || p.h.DestinationPort() != 5001 {
		t.Errorf("reply %v to %#x", p.types(), p.h.VerificationTag())
	}
	if est.PeerVerificationTag != 0xA1A2A3A4 || est.PeerInitialTSN != 0xB1B2B3B4 || est.PeerARwnd != 100000 ||
		est.OutboundStreams != 10 || est.InboundStreams != 8 || !est.PeerAdaptation.DDP() {
		t.Errorf("established %+v", est)
	}
	// §5.1 D: "A COOKIE ACK chunk MAY be bundled with any pending DATA
	// chunks": the COOKIE ECHO may carry DATA, left to the association.
	data := chunk.Data{Flags: chunk.FlagBeginning | chunk.FlagEnding, TSN: 0xB1B2B3B4, PPID: 16, UserData: []byte{1}}.Append(nil)
	if _, _, err := HandleCookieEcho(nil, cookieEchoFor(t, res.Packet, data), &keys, testNow); err != nil {
		t.Errorf("with DATA: %v", err)
	}

	// Step 4: "If the elapsed time is longer than the lifespan carried in
	// the State Cookie, then the packet ... SHOULD be discarded, and the
	// endpoint MUST transmit an ERROR chunk with a "Stale Cookie" error
	// cause to the peer endpoint."
	reply, _, err = HandleCookieEcho(nil, echo, &keys, testNow.Add(61*time.Second))
	var stale *StaleCookieError
	if !errors.As(err, &stale) || stale.Staleness != 1000000 {
		t.Fatalf("stale: %v", err)
	}
	p = parsePacket(t, reply)
	if len(p.chunks) != 1 || p.chunks[0].Type() != chunk.TypeError || p.h.VerificationTag() != 0xA1A2A3A4 {
		t.Fatalf("stale reply %v to %#x", p.types(), p.h.VerificationTag())
	}
	oe, _, _ := chunk.ParseOperationError(p.chunks[0])
	if sc, _, err := chunk.ParseStaleCookie(oe.Causes); err != nil || sc.Staleness != 1000000 {
		t.Errorf("Stale Cookie cause %x: %v", oe.Causes, err)
	}

	tampered := bytes.Clone(echo)
	tampered[len(tampered)-1] ^= 1
	chunk.SetPacketChecksum(tampered)
	h := chunk.Header(echo)
	for _, tc := range []struct {
		name string
		pkt  []byte
		want error
	}{
		// Step 2: "If this comparison fails, the SCTP packet, including
		// the COOKIE ECHO chunk and any DATA chunks, MUST be silently
		// discarded."
		{"MAC", tampered, ErrCookieMAC},
		{"length", packet(5001, 5000, h.VerificationTag(), chunk.CookieEcho{Cookie: make([]byte, 10)}.Append(nil)), ErrCookieLength},
		// Step 3: "Compare the port numbers and the Verification Tag
		// contained within the COOKIE ECHO chunk to the actual port
		// numbers and the Verification Tag within the SCTP common header
		// of the received packet. If these values do not match, the
		// packet MUST be silently discarded."
		{"Verification Tag", withTag(echo, h.VerificationTag()+1), ErrVerificationTag},
		{"source port", withPorts(echo, 5002, 5000), ErrPort},
		{"destination port", withPorts(echo, 5001, 5002), ErrPort},
		// §3.2.2: "Any time a COOKIE ECHO chunk is sent in a packet, it
		// MUST be the first chunk."
		{"not first", packet(5001, 5000, h.VerificationTag(), data, chunk.Raw(echo[12:])), ErrUnexpectedChunk},
		{"empty", packet(5001, 5000, h.VerificationTag()), chunk.ErrTruncated},
	} {
		reply, _, err := HandleCookieEcho(nil, tc.pkt, &keys, testNow)
		if reply != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, reply %x; want %v", tc.name, err, reply, tc.want)
		}
	}
	// A stale cookie with another tag is discarded, not answered: step 3
	// comes before step 4.
	if reply, _, err := HandleCookieEcho(nil, withTag(echo, 7), &keys, testNow.Add(time.Hour)); reply != nil || !errors.Is(err, ErrVerificationTag) {
		t.Errorf("stale, wrong tag: %v, %x", err, reply)
	}
}

func withTag(pkt []byte, vtag uint32) []byte {
	p := bytes.Clone(pkt)
	chunk.Header(p).SetVerificationTag(vtag)
	chunk.SetPacketChecksum(p)
	return p
}

func withPorts(pkt []byte, src, dst uint16) []byte {
	p := bytes.Clone(pkt)
	chunk.Header(p).SetSourcePort(src)
	chunk.Header(p).SetDestinationPort(dst)
	chunk.SetPacketChecksum(p)
	return p
}

// TestDecideCookieEcho checks §5.2.4 Table 12 row by row: the cookie's
// Verification Tags against the association's, its Tie-Tags against the
// association's Tie-Tags.
func TestDecideCookieEcho(t *testing.T) {
	const local, peer, ltie, ptie, other, other2 = 0x100, 0x200, 0x10, 0x20, 0x300, 0x400
	tcb := AssociationTags{Local: local, Peer: peer, LocalTie: ltie, PeerTie: ptie}
	waiting := AssociationTags{Local: local} // COOKIE-WAIT: no Peer's Tag, no Tie-Tags
	cookie := func(l, p, lt, pt uint32) *StateCookie {
		return &StateCookie{LocalVerificationTag: l, PeerVerificationTag: p, LocalTieTag: lt, PeerTieTag: pt}
	}
	for _, tc := range []struct {
		name      string
		c         *StateCookie
		a         AssociationTags
		want      CookieAction
		wantStale CookieAction // the same cookie, stale
	}{
		{"X X M M", cookie(other, other2, ltie, ptie), tcb, CookieRestart, CookieStale},
		{"M X A A", cookie(local, other, 0, 0), tcb, CookieCollision, CookieStale},
		{"M X M M", cookie(local, other, ltie, ptie), tcb, CookieCollision, CookieStale},
		{"M X X X", cookie(local, other, other, other), tcb, CookieCollision, CookieStale},
		{"M 0 A A", cookie(local, other, 0, 0), waiting, CookieCollision, CookieStale},
		{"X M 0 0", cookie(other, peer, 0, 0), tcb, CookieLate, CookieStale},
		{"M M A A", cookie(local, peer, 0, 0), tcb, CookieDuplicate, CookieDuplicate},
		{"M M X X", cookie(local, peer, other, other), tcb, CookieDuplicate, CookieDuplicate},
		// "For any case not shown in Table 12, the cookie SHOULD be
		// silently discarded."
		{"X X 0 0", cookie(other, other2, 0, 0), tcb, CookieDiscard, CookieStale},
		{"X X M X", cookie(other, other2, ltie, other), tcb, CookieDiscard, CookieStale},
		{"X X X M", cookie(other, other2, other, ptie), tcb, CookieDiscard, CookieStale},
		{"X M M M", cookie(other, peer, ltie, ptie), tcb, CookieDiscard, CookieStale},
		// RFC 4960's Tie-Tags were the tags themselves; RFC 9260's are
		// their own values, so a cookie holding the tags as Tie-Tags
		// does not match.
		{"X X tags as Tie-Tags", cookie(other, other2, local, peer), tcb, CookieDiscard, CookieStale},
		// A Tie-Tag of 0 is "No Tie-Tag in cookie", not a match for an
		// association without Tie-Tags.
		{"X 0 0 0", cookie(other, other2, 0, 0), waiting, CookieDiscard, CookieStale},
	} {
		if got := DecideCookieEcho(tc.c, false, tc.a); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		// §5.2.4 step 3: a stale cookie is answered with a Stale Cookie
		// error "and the Verification Tags contained in the State Cookie
		// do not match the current association's Verification Tags"; "If
		// both Verification Tags in the State Cookie match ... consider
		// the State Cookie valid ..., even if the lifespan is exceeded."
		if got := DecideCookieEcho(tc.c, true, tc.a); got != tc.wantStale {
			t.Errorf("%s, stale: %v, want %v", tc.name, got, tc.wantStale)
		}
	}
	if CookieRestart.String() != "A (restart)" || CookieAction(99).String() != "CookieAction(99)" {
		t.Error("CookieAction.String")
	}
}
