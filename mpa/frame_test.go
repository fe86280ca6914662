package mpa

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/iwarpgo/iwarp/term"
)

// The Key octets exactly as RFC 5044 §7.1.1 lists them.
var (
	reqKeyRFC = []byte{0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65}
	repKeyRFC = []byte{0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65}
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

var frameGolden = []struct {
	name string
	f    Frame
	wire []byte
}{
	{
		// Frame 4 of captures/siw-rping-mpa-rev1.pcap: no Markers, no
		// CRC, Rev 1, no Private Data.
		name: "siw request rev1",
		f:    Frame{Rev: 1},
		wire: cat(reqKeyRFC, []byte{0x00, 0x01, 0x00, 0x00}),
	},
	{
		name: "siw reply rev1",
		f:    Frame{Reply: true, Rev: 1},
		wire: cat(repKeyRFC, []byte{0x00, 0x01, 0x00, 0x00}),
	},
	{
		name: "request M C with private data",
		f:    Frame{Markers: true, CRC: true, Rev: 1, PrivateData: []byte("hello")},
		wire: cat(reqKeyRFC, []byte{0xC0, 0x01, 0x00, 0x05}, []byte("hello")),
	},
	{
		name: "reply rejected",
		f:    Frame{Reply: true, CRC: true, Reject: true, Rev: 1, PrivateData: []byte{1, 2, 3}},
		wire: cat(repKeyRFC, []byte{0x60, 0x01, 0x00, 0x03, 1, 2, 3}),
	},
	{
		// RFC 6581: S set, Rev 2, enhanced data P2P + Read RTR, IRD 16,
		// ORD 8, then 2 octets of ULP private data.
		name: "enhanced request rev2",
		f: Frame{CRC: true, Enhanced: true, Rev: 2,
			PrivateData: []byte{0x80, 0x10, 0x40, 0x08, 0xaa, 0xbb}},
		wire: cat(reqKeyRFC, []byte{0x50, 0x02, 0x00, 0x06, 0x80, 0x10, 0x40, 0x08, 0xaa, 0xbb}),
	},
	{
		name: "max private data",
		f:    Frame{Reply: true, Rev: 1, PrivateData: bytes.Repeat([]byte{0x5a}, 512)},
		wire: cat(repKeyRFC, []byte{0x00, 0x01, 0x02, 0x00}, bytes.Repeat([]byte{0x5a}, 512)),
	},
}

func frameEqual(a, b Frame) bool {
	return a.Reply == b.Reply && a.Markers == b.Markers && a.CRC == b.CRC && a.Reject == b.Reject &&
		a.Enhanced == b.Enhanced && a.Res == b.Res && a.Rev == b.Rev && bytes.Equal(a.PrivateData, b.PrivateData)
}

func TestFrameGolden(t *testing.T) {
	for _, tc := range frameGolden {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := tc.f.Append(nil)
			if !bytes.Equal(got, tc.wire) {
				t.Fatalf("Append:\n got %x\nwant %x", got, tc.wire)
			}
			if tc.f.Len() != len(tc.wire) {
				t.Fatalf("Len %d, want %d", tc.f.Len(), len(tc.wire))
			}
			f, n, err := ParseFrame(append(tc.wire, 0xee, 0xff)) // trailing octets: the first FPDU
			if err != nil || n != len(tc.wire) {
				t.Fatalf("ParseFrame: n=%d err=%v", n, err)
			}
			if !frameEqual(f, tc.f) {
				t.Fatalf("ParseFrame: got %+v want %+v", f, tc.f)
			}
			// Every strict prefix is rejected as short.
			for i := range len(tc.wire) {
				_, n, err := ParseFrame(tc.wire[:i])
				if err == nil || n != 0 || !errors.Is(err, ErrShortFrame) || !errors.Is(err, term.MPAInvalidFrame) {
					t.Fatalf("prefix %d: n=%d err=%v", i, n, err)
				}
			}
			// ReadFrame reads exactly the frame, from any chunking.
			for _, r := range []io.Reader{
				bytes.NewReader(append(tc.wire, 0xee)),
				iotest.OneByteReader(bytes.NewReader(append(tc.wire, 0xee))),
			} {
				f, err := ReadFrame(r)
				if err != nil || !frameEqual(f, tc.f) {
					t.Fatalf("ReadFrame: %+v %v", f, err)
				}
				rest, _ := io.ReadAll(r)
				if !bytes.Equal(rest, []byte{0xee}) {
					t.Fatalf("ReadFrame left %x", rest)
				}
			}
		})
	}
}

func TestFrameRejects(t *testing.T) {
	good := frameGolden[2].wire
	mod := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	pd513 := cat(reqKeyRFC, []byte{0, 1, 0x02, 0x01}, make([]byte, 513))
	cases := []struct {
		name string
		b    []byte
	}{
		{"bad key", mod(3, 'x')},
		{"bad key short", []byte("MPA IX")},
		{"lower case key", cat([]byte("mpa id req frame"), []byte{0, 1, 0, 0})},
		{"rev 0", mod(17, 0)},
		{"rev 3", mod(17, 3)},
		{"pd_length 513", pd513},
		{"pd_length 0xffff", cat(reqKeyRFC, []byte{0, 1, 0xff, 0xff})},
		{"S with pd_length 3", cat(reqKeyRFC, []byte{0x10, 2, 0, 3, 0, 0, 0})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFrame(tc.b)
			if err == nil || !errors.Is(err, term.MPAInvalidFrame) || errors.Is(err, ErrShortFrame) {
				t.Fatalf("ParseFrame: %v", err)
			}
			if _, err := ReadFrame(bytes.NewReader(tc.b)); err == nil || !errors.Is(err, term.MPAInvalidFrame) {
				t.Fatalf("ReadFrame: %v", err)
			}
			t.Log(err)
		})
	}
}

func TestFrameReservedBits(t *testing.T) {
	// Rev 1: the S position is reserved, "not checked on reception".
	b := cat(reqKeyRFC, []byte{0x1f, 1, 0, 0})
	f, _, err := ParseFrame(b)
	if err != nil || f.Enhanced || f.Res != 0x1f {
		t.Fatalf("rev 1 reserved: %+v %v", f, err)
	}
	if got := f.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("rev 1 round trip %x", got)
	}
	// Rev 2: S is the S bit, Res the four bits below it.
	b = cat(repKeyRFC, []byte{0x1f, 2, 0, 4, 0, 0, 0, 0})
	f, _, err = ParseFrame(b)
	if err != nil || !f.Enhanced || f.Res != 0x0f {
		t.Fatalf("rev 2 reserved: %+v %v", f, err)
	}
	if got := f.Append(nil); !bytes.Equal(got, b) {
		t.Fatalf("rev 2 round trip %x", got)
	}
	// R in a Request is not checked: ignored.
	f, _, err = ParseFrame(cat(reqKeyRFC, []byte{0x20, 1, 0, 0}))
	if err != nil || f.Reject {
		t.Fatalf("R in request: %+v %v", f, err)
	}
}

func TestFrameValidate(t *testing.T) {
	bad := []Frame{
		{Rev: 0},
		{Rev: 3},
		{Rev: 1, PrivateData: make([]byte, 513)},
		{Rev: 1, Enhanced: true, PrivateData: make([]byte, 4)},
		{Rev: 2, Enhanced: true, PrivateData: make([]byte, 3)},
		{Rev: 1, Reject: true},
	}
	for i, f := range bad {
		if err := f.Validate(); !errors.Is(err, term.MPAInvalidFrame) {
			t.Errorf("%d: Validate(%v) = %v", i, f, err)
		}
	}
}

func TestReadFrameEOF(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader(nil)); err != io.EOF {
		t.Fatalf("empty: %v", err)
	}
	w := frameGolden[2].wire
	for _, n := range []int{1, 16, 19, 20, len(w) - 1} {
		_, err := ReadFrame(bytes.NewReader(w[:n]))
		if !errors.Is(err, term.MPAConnectionLost) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d octets: %v", n, err)
		}
	}
}

func TestFrameEnhancement(t *testing.T) {
	f := frameGolden[4].f
	e, ulp, ok := f.Enhancement()
	want := EnhancedData{PeerToPeer: true, ReadRTR: true, IRD: 16, ORD: 8}
	if !ok || e != want || !bytes.Equal(ulp, []byte{0xaa, 0xbb}) {
		t.Fatalf("Enhancement: %v %x %v", e, ulp, ok)
	}
	_, ulp, ok = frameGolden[2].f.Enhancement()
	if ok || string(ulp) != "hello" {
		t.Fatalf("plain frame: %x %v", ulp, ok)
	}
}

func TestNegotiate(t *testing.T) {
	req := Frame{Markers: true, CRC: false, Rev: 1}
	rep := Frame{Reply: true, Markers: false, CRC: true, Rev: 1}
	fi, fr := Negotiate(&req, &rep)
	// The Request's M asks for Markers from the Responder; the Reply's M
	// from the Initiator. Either C turns CRCs on both ways.
	if fi != (Options{Markers: false, CRC: true}) || fr != (Options{Markers: true, CRC: true}) {
		t.Fatalf("Negotiate: %+v %+v", fi, fr)
	}
	fi, fr = Negotiate(&Frame{Rev: 1}, &Frame{Reply: true, Rev: 1})
	if fi.CRC || fr.CRC || fi.Markers || fr.Markers {
		t.Fatalf("Negotiate off: %+v %+v", fi, fr)
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, tc := range frameGolden {
		f.Add(tc.wire)
	}
	f.Add([]byte("MPA ID Req Frame\x10\x02\x00\x03abc"))
	f.Add([]byte("MPA ID Rep Frame\xff\x01\x02\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := ParseFrame(b)
		if err != nil {
			if n != 0 || !errors.Is(err, term.MPAInvalidFrame) {
				t.Fatalf("error %v with n=%d", err, n)
			}
			return
		}
		if n != fr.Len() || n > len(b) || n > MaxFrameLen {
			t.Fatalf("n=%d Len=%d", n, fr.Len())
		}
		if err := fr.Validate(); err != nil && fr.Rev >= Rev2 {
			t.Fatalf("parsed frame does not validate: %v", err)
		}
		enc := fr.Append(nil)
		fr2, n2, err := ParseFrame(enc)
		if err != nil || n2 != len(enc) || !frameEqual(fr, fr2) {
			t.Fatalf("round trip: %+v -> %x -> %+v %v", fr, enc, fr2, err)
		}
		// The octets match the input except a Request's ignored R bit.
		want := bytes.Clone(b[:n])
		if !fr.Reply {
			want[16] &^= flagR
		}
		if !bytes.Equal(enc, want) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, want)
		}
	})
}
