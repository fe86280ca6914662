package chunk

import (
	"bytes"
	"os"
	"testing"
)

func readHexFile(t *testing.T, name string) []byte {
	t.Helper()
	s, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return hexBytes(t, string(s))
}

// parseLinuxInit checks a hand-decoded INIT packet and returns its
// parameter types in order.
func parseLinuxInit(t *testing.T, pkt []byte) (Init, []ParamType) {
	t.Helper()
	if err := VerifyChecksum(pkt); err != nil {
		t.Fatalf("%v (CRC32c of the packet is %x)", err, Checksum(pkt))
	}
	it := Chunks(pkt)
	if !it.Next() {
		t.Fatal(it.Err())
	}
	init, _, err := ParseInit(it.Chunk())
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() || it.Err() != nil {
		t.Errorf("more than the INIT: %v", it.Err())
	}
	if err := init.Check(); err != nil {
		t.Error(err)
	}
	var types []ParamType
	ps := Params(init.Params)
	for ps.Next() {
		p := ps.Param()
		types = append(types, p.Type())
		if enc, err := reencodeParam(p); err != nil || !bytes.Equal(enc, padded(p)) {
			t.Errorf("%v: %x re-encoded as %x, %v", p.Type(), p, enc, err)
		}
	}
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	// Our encoding of the parsed INIT is the packet.
	h := Header(pkt)
	again := init.Append(AppendHeader(nil, h.SourcePort(), h.DestinationPort(), h.VerificationTag()))
	SetPacketChecksum(again)
	if !bytes.Equal(again, pkt) {
		t.Errorf("re-encoded:\n got %x\nwant %x", again, pkt)
	}
	return init, types
}

func padded(p Param) []byte { return appendPad(bytes.Clone(p), len(p)) }

func TestLinuxInit(t *testing.T) {
	init, types := parseLinuxInit(t, readHexFile(t, "testdata/linux_init.hex"))
	if init.InitiateTag != 0x3f5c9a21 || init.ARwnd != 106496 || init.NumOutboundStreams != 10 || init.NumInboundStreams != 65535 || init.InitialTSN != 0x8d1e6b03 {
		t.Errorf("fixed fields %+v", init)
	}
	want := []ParamType{ParamIPv4Address, ParamIPv4Address, ParamSupportedAddressTypes, ParamECNCapable,
		ParamSupportedExtensions, ParamForwardTSNSupported, ParamAdaptationLayerIndication}
	if !equalTypes(types, want) {
		t.Errorf("parameters %v, want %v", types, want)
	}
	ps := Params(init.Params)
	var addrs [][4]byte
	for ps.Next() {
		switch p := ps.Param(); p.Type() {
		case ParamIPv4Address:
			a, _, err := ParseIPv4Address(p)
			if err != nil {
				t.Fatal(err)
			}
			addrs = append(addrs, a.Addr)
		case ParamSupportedAddressTypes:
			s, _, _ := ParseSupportedAddressTypes(p)
			if s.Types.Len() != 1 || s.Types.At(0) != ParamIPv4Address {
				t.Errorf("Supported Address Types %x", s.Types)
			}
		case ParamAdaptationLayerIndication:
			a, _, _ := ParseAdaptationLayerIndication(p)
			if a.AdaptationCodePoint != AdaptationCodePointDDP {
				t.Errorf("Adaptation Code Point %#x", a.AdaptationCodePoint)
			}
		}
	}
	if len(addrs) != 2 || addrs[0] != [4]byte{192, 168, 1, 10} || addrs[1] != [4]byte{10, 0, 0, 10} {
		t.Errorf("addresses %v", addrs)
	}
}

func TestLinuxInitUDP(t *testing.T) {
	dgram := readHexFile(t, "testdata/linux_init_udp.hex")
	// RFC 6951 §5: the SCTP packet follows the 8-byte UDP header whole.
	if len(dgram) != int(dgram[4])<<8|int(dgram[5]) {
		t.Fatalf("UDP Length %d, datagram %d bytes", int(dgram[4])<<8|int(dgram[5]), len(dgram))
	}
	init, types := parseLinuxInit(t, dgram[8:])
	want := []ParamType{ParamSupportedAddressTypes, ParamECNCapable, ParamSupportedExtensions,
		ParamForwardTSNSupported, ParamAdaptationLayerIndication, ParamRandom, ParamRequestedHMACAlgorithm, ParamChunkList}
	if !equalTypes(types, want) {
		t.Errorf("parameters %v, want %v", types, want)
	}
	// The RFC 4895 parameters are carried opaque; unrecognised, their
	// types' upper bits would say skip (10).
	ps := Params(init.Params)
	for ps.Next() {
		p := ps.Param()
		switch p.Type() {
		case ParamRandom, ParamRequestedHMACAlgorithm, ParamChunkList:
			if p.Type().Unrecognized() != ActionSkip {
				t.Errorf("%v: %v", p.Type(), p.Type().Unrecognized())
			}
		case ParamSupportedExtensions:
			e, _, _ := ParseSupportedExtensions(p)
			for _, typ := range []Type{TypeASCONF, TypeASCONFAck, TypeReconfig, TypeIData, TypeAuth} {
				if !e.Has(typ) {
					t.Errorf("Supported Extensions without %v", typ)
				}
			}
		}
	}
}

func equalTypes(a, b []ParamType) bool {
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
