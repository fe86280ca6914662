package chunk

import (
	"bytes"
	"os"
	"testing"
)

// seedPackets are packets for the fuzzers to start from: one of each chunk
// type, the Linux INITs and a bundle.
func seedPackets(t testing.TB) [][]byte {
	var seeds [][]byte
	add := func(chunks ...codec) {
		b := AppendHeader(nil, 5000, 5000, 1)
		for _, c := range chunks {
			b = c.Append(b)
		}
		SetPacketChecksum(b)
		seeds = append(seeds, b)
	}
	params := SupportedExtensions{ChunkTypes: []byte{0x82, 0x40}}.Append(nil)
	params = AdaptationLayerIndication{AdaptationCodePoint: AdaptationCodePointDDP}.Append(params)
	params = RawParam{Type: ParamStateCookie, Value: []byte("c")}.Append(params)
	causes := NoUserData{TSN: 1}.Append(nil)
	causes = MissingMandatoryParameter{Types: ParamTypeList{0, 7}}.Append(causes)
	causes = RawCause{Code: CauseUserInitiatedAbort, Info: []byte("x")}.Append(causes)
	add(Init{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1, Params: params})
	add(InitAck{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1, Params: params})
	add(CookieEcho{Cookie: []byte("cookie")}, Data{Flags: FlagBeginning | FlagEnding, UserData: []byte("abc")})
	add(CookieAck{}, SACK{GapAckBlocks: GapAckBlocks{0, 2, 0, 3}, DuplicateTSNs: TSNList{0, 0, 0, 1}})
	add(Heartbeat{Info: []byte("12345")}, HeartbeatAck{Info: []byte("1")})
	add(Abort{T: true, Causes: causes})
	add(OperationError{Causes: causes}, Shutdown{}, ShutdownAck{})
	add(ShutdownComplete{T: true})
	add(ForwardTSN{Streams: ForwardTSNStreams{0, 1, 0, 2}}, IForwardTSN{Streams: IForwardTSNStreams{0, 1, 0, 1, 0, 0, 0, 5}})
	add(Reconfig{Params: OutgoingSSNResetRequest{Streams: StreamList{0, 1}}.Append(ReconfigResponse{HasNextTSNs: true}.Append(nil))})
	add(IData{Flags: FlagBeginning, UserData: []byte("i")}, IData{UserData: []byte("j")})
	add(ASCONF{Params: AddressRequest{Type: ParamAddIPAddress, Address: IPv4Address{}.Append(nil)}.Append(IPv4Address{}.Append(nil))})
	add(ASCONFAck{Params: ErrorCauseIndication{Causes: causes}.Append(SuccessIndication{}.Append(nil))})
	for _, f := range []string{"testdata/linux_init.hex", "testdata/linux_init_udp.hex"} {
		s, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b := hexBytes(t, string(s))
		if f == "testdata/linux_init_udp.hex" {
			b = b[8:]
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzPacket feeds any bytes to the packet iterator and parses each chunk
// by its type. Every chunk a parser accepts must encode again to the same
// chunk, modulo padding and the bits the receiver ignores, and the
// re-encoding must parse to the same encoding again; the parameters and
// error causes of accepted chunks are parsed and re-encoded likewise.
func FuzzPacket(f *testing.F) {
	for _, s := range seedPackets(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		_ = VerifyChecksum(pkt)
		it := Chunks(pkt)
		for it.Next() {
			c := it.Chunk()
			_ = c.Type().Unrecognized()
			enc, known, err := reencode(c)
			if !known || err != nil {
				continue
			}
			if err := sameModuloPadding(c, enc); err != nil {
				t.Fatalf("%v chunk %x: %v", c.Type(), c, err)
			}
			again, _, err := reencode(Raw(enc))
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("%v chunk %x: re-encoding %x parses back to %x, %v", c.Type(), c, enc, again, err)
			}
			checkInner(t, c)
		}
	})
}

// checkInner round-trips the parameters or error causes of an accepted
// chunk.
func checkInner(t *testing.T, c Raw) {
	var params, causes []byte
	switch c.Type() {
	case TypeInit:
		i, _, _ := ParseInit(c)
		params = i.Params
	case TypeInitAck:
		i, _, _ := ParseInitAck(c)
		params = i.Params
	case TypeReconfig:
		r, _, _ := ParseReconfig(c)
		params = r.Params
	case TypeASCONF:
		a, _, _ := ParseASCONF(c)
		params = a.Params
	case TypeASCONFAck:
		a, _, _ := ParseASCONFAck(c)
		params = a.Params
	case TypeAbort:
		a, _, _ := ParseAbort(c)
		causes = a.Causes
	case TypeError:
		e, _, _ := ParseOperationError(c)
		causes = e.Causes
	}
	checkParamList(t, params)
	checkCauseList(t, causes)
}

func checkParamList(t *testing.T, params []byte) {
	it := Params(params)
	for it.Next() {
		p := it.Param()
		_ = p.Type().Unrecognized()
		enc, err := reencodeParam(p)
		if err != nil {
			continue
		}
		if want := maskReserved(padded(p)); !bytes.Equal(maskReserved(enc), want) {
			t.Fatalf("%v parameter %x re-encoded as %x", p.Type(), p, enc)
		}
		if p.Type() == ParamErrorCauseIndication {
			e, _, _ := ParseErrorCauseIndication(p)
			checkCauseList(t, e.Causes)
		}
	}
}

func checkCauseList(t *testing.T, causes []byte) {
	it := Causes(causes)
	for it.Next() {
		c := it.Cause()
		enc, err := reencodeCause(c)
		if err != nil {
			t.Fatalf("%v cause %x accepted by the iterator, rejected by its parser: %v", c.Code(), c, err)
		}
		if want := maskCauseReserved(appendPad(bytes.Clone(c), len(c))); !bytes.Equal(maskCauseReserved(enc), want) {
			t.Fatalf("%v cause %x re-encoded as %x", c.Code(), c, enc)
		}
	}
}

// FuzzParams feeds any bytes as the parameters of an INIT: the INIT must
// parse if and only if every parameter's length is valid, and every
// parameter its parser accepts must encode again to the same bytes.
func FuzzParams(f *testing.F) {
	for _, s := range seedPackets(f) {
		it := Chunks(s)
		for it.Next() {
			switch it.Chunk().Type() {
			case TypeInit:
				i, _, _ := ParseInit(it.Chunk())
				f.Add(i.Params)
			case TypeReconfig, TypeASCONF, TypeASCONFAck:
				f.Add(it.Chunk().Value())
			}
		}
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if len(params) > MaxChunkLength-initFixedLen {
			return
		}
		b := Init{InitiateTag: 1, ARwnd: 1500, NumOutboundStreams: 1, NumInboundStreams: 1, Params: params}.Append(nil)
		init, _, err := ParseInit(b)
		_, listErr := checkParams(params)
		if (err == nil) != (listErr == nil) {
			t.Fatalf("ParseInit: %v; parameter list: %v", err, listErr)
		}
		if err == nil && !bytes.Equal(init.Params, params) && !(len(params) == 0 && init.Params == nil) {
			t.Fatalf("Params %x, want %x", init.Params, params)
		}
		checkParamList(t, params)
		_, _ = StateCookie(params)
	})
}
