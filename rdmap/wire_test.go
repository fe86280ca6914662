package rdmap

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 5040 §4.1 Figure 3 and Figure 4: RV = 01b in bits 24-25, Rsv zero,
// the opcode in bits 28-31.
func TestControl(t *testing.T) {
	want := map[Opcode]byte{OpWrite: 0x40, OpReadRequest: 0x41, OpReadResponse: 0x42, OpSend: 0x43,
		OpSendInvalidate: 0x44, OpSendSE: 0x45, OpSendSEInvalidate: 0x46, OpTerminate: 0x47,
		// RFC 7306 Figure 2 (and its IANA registrations, §10).
		OpImmediate: 0x48, OpImmediateSE: 0x49, OpAtomicRequest: 0x4a, OpAtomicResponse: 0x4b}
	for op, b := range want {
		c := MakeControl(op)
		if byte(c) != b || c.Opcode() != op || c.RV() != 1 || !c.ValidVersion() || !op.Valid() {
			t.Errorf("%v: %#x, want %#x", op, byte(c), b)
		}
	}
	for op := Opcode(12); op < 16; op++ {
		if op.Valid() {
			t.Errorf("reserved opcode %#x valid", uint8(op))
		}
	}
	// "Both version numbers are valid": 00b and 01b.
	if !Control(0x03).ValidVersion() || Control(0x83).ValidVersion() || Control(0xc3).ValidVersion() {
		t.Error("version check")
	}
	// Figure 4: the tagged flag and queue number of each opcode.
	for _, tc := range []struct {
		op     Opcode
		tagged bool
		qn     uint32
	}{{OpWrite, true, 0}, {OpReadRequest, false, 1}, {OpReadResponse, true, 0}, {OpSend, false, 0},
		{OpSendInvalidate, false, 0}, {OpSendSE, false, 0}, {OpSendSEInvalidate, false, 0}, {OpTerminate, false, 2},
		// RFC 7306 Figure 2: all untagged; Immediate Data on queue 0, the
		// Atomic Request on 1, the Atomic Response on 3.
		{OpImmediate, false, 0}, {OpImmediateSE, false, 0}, {OpAtomicRequest, false, 1}, {OpAtomicResponse, false, 3}} {
		if tc.op.Tagged() != tc.tagged || (!tc.tagged && tc.op.QN() != tc.qn) {
			t.Errorf("%v: tagged %v qn %d", tc.op, tc.op.Tagged(), tc.op.QN())
		}
	}
}

var goldenRR = ReadRequest{SinkSTag: 0x11223344, SinkTO: 0x0102030405060708, RDMARDSZ: 0x00010000, SrcSTag: 0xaabbccdd, SrcTO: 0x1112131415161718}

const goldenRRWire = "11223344 0102030405060708 00010000 aabbccdd 1112131415161718"

func TestReadRequestGolden(t *testing.T) {
	want := unhex(t, goldenRRWire)
	if got := goldenRR.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Append = % x", got)
	}
	r, n, err := ParseReadRequest(want)
	if err != nil || n != ReadRequestLen || r != goldenRR {
		t.Fatalf("Parse = %+v %d %v", r, n, err)
	}
	for i := 0; i < len(want); i++ {
		if _, _, err := ParseReadRequest(want[:i]); err == nil {
			t.Fatalf("accepted a %d-octet prefix", i)
		}
	}
}

var goldenTerminates = []struct {
	name string
	t    TerminateHeader
	wire string
}{
	{
		// A local catastrophic error: no headers (RFC 5040 Figure 10).
		name: "local catastrophic",
		t:    TerminateHeader{Layer: term.LayerRDMAP, EType: 0},
		wire: "00 00 00 00",
	},
	{
		// DDP tagged Invalid STag on an RDMA Write of 100 octets: M and D
		// set, segment length 114, the tagged header copied.
		name: "ddp invalid stag",
		t: TerminateHeader{Layer: term.LayerDDP, EType: 1, Code: 0, M: true, D: true, SegLen: 114,
			DDPHeader: []byte{0xc1, 0x40, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0x28, 0}},
		wire: "11 00 c0 00 0072 c140000012340000000000002800",
	},
	{
		// RDMAP base/bounds on a Read Request: M, D and R; the untagged
		// header and the Read Request Header copied.
		name: "rdmap read request bounds",
		t: TerminateHeader{Layer: term.LayerRDMAP, EType: 1, Code: 1, M: true, D: true, R: true, SegLen: 46,
			DDPHeader:  []byte{0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0},
			RDMAHeader: goldenRR.Append(nil)},
		wire: "01 01 e0 00 002e 414100000000000000010000000100000000 " + goldenRRWire,
	},
	{
		// An MPA CRC error: LLP layer, no headers.
		name: "mpa crc",
		t:    TerminateHeader{Layer: term.LayerLLP, EType: 0, Code: 2},
		wire: "20 02 00 00",
	},
}

func TestTerminateGolden(t *testing.T) {
	for _, g := range goldenTerminates {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.wire)
			if got := g.t.Append(nil); !bytes.Equal(got, want) {
				t.Fatalf("Append = % x\nwant     % x", got, want)
			}
			if g.t.Len() != len(want) {
				t.Fatalf("Len %d", g.t.Len())
			}
			p, n, err := ParseTerminate(want)
			if err != nil || n != len(want) || !bytes.Equal(p.Append(nil), want) {
				t.Fatalf("Parse = %+v %d %v", p, n, err)
			}
			if !errors.Is(p.Err(), term.New(g.t.Layer, g.t.EType, g.t.Code)) || !p.Err().Remote {
				t.Fatal("Err()")
			}
			for i := 0; i < len(want); i++ {
				if _, _, err := ParseTerminate(want[:i]); err == nil {
					t.Fatalf("accepted a %d-octet prefix", i)
				}
			}
		})
	}
	if _, _, err := ParseTerminate(unhex(t, "01012000")); err != ErrTerminateHdrCt {
		t.Fatalf("R without D: %v", err)
	}
}

func FuzzParseTerminate(f *testing.F) {
	for _, g := range goldenTerminates {
		f.Add(unhex(f, g.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err := ParseTerminate(b)
		if err != nil {
			return
		}
		if n > len(b) || p.Len() != n {
			t.Fatalf("n %d len %d", n, p.Len())
		}
		out := p.Append(nil)
		want := append([]byte(nil), b[:n]...)
		want[2] &= 0xe0 // reserved bits are zero on transmit
		want[3] = 0
		if !bytes.Equal(out, want) {
			t.Fatalf("round trip % x -> % x", b[:n], out)
		}
	})
}

func FuzzParseReadRequest(f *testing.F) {
	f.Add(unhex(f, goldenRRWire))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := ParseReadRequest(b)
		if err != nil {
			return
		}
		if !bytes.Equal(r.Append(nil), b[:n]) {
			t.Fatal("round trip")
		}
	})
}
