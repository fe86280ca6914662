package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Golden DDP Stream Session Control messages, written from RFC 5043
// §5.2.3's figure (DDP-SSN, Function Code, Private Data) and RFC 6581 §9's
// enhanced data.
var (
	goldenInitiate = []byte{
		0x00, 0x00, // DDP-SSN 0: "reset to zero at the beginning of each DDP Stream Session" (§6.1)
		0x00, 0x01, // Function Code: DDP Stream Session Initiate
		'h', 'e', 'l', 'l', 'o', // Private Data
	}
	goldenAcceptEmpty = []byte{
		0x00, 0x00, // DDP-SSN 0
		0x00, 0x02, // DDP Stream Session Accept, zero-length Private Data
	}
	goldenReject = []byte{0x00, 0x00, 0x00, 0x03, 'n', 'o'}
	goldenTerm   = []byte{
		0x01, 0x02, // DDP-SSN 0x0102
		0x00, 0x04, // DDP Stream Session Terminate: no Private Data
	}
	goldenEnhancedInitiate = []byte{
		0x00, 0x00, // DDP-SSN 0
		0x00, 0x05, // Enhanced DDP Stream Session Initiate
		0x80, 0x04, // A=1 B=0 IRD=4
		0x40, 0x02, // C=0 D=1 ORD=2
	}
	goldenEnhancedAccept = []byte{
		0x00, 0x00, 0x00, 0x06, // DDP-SSN 0, Enhanced DDP Stream Session Accept
		0x80, 0x02, 0x40, 0x04, // A=1 IRD=2, D=1 ORD=4
		0xAB, // ULP Private Data
	}
	goldenEnhancedReject = []byte{
		0x00, 0x00, 0x00, 0x07, // DDP-SSN 0, Enhanced DDP Stream Session Reject
		0x00, 0x00, 0x00, 0x01, // A=0, IRD=0, ORD=1
	}
)

func TestSessionControlGolden(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
		m    SessionControl
	}{
		{"initiate", goldenInitiate, SessionControl{Function: FunctionInitiate, PrivateData: []byte("hello")}},
		{"accept empty", goldenAcceptEmpty, SessionControl{Function: FunctionAccept}},
		{"reject", goldenReject, SessionControl{Function: FunctionReject, PrivateData: []byte("no")}},
		{"terminate", goldenTerm, SessionControl{SSN: 0x0102, Function: FunctionTerminate}},
		{"enhanced initiate", goldenEnhancedInitiate, SessionControl{Function: FunctionEnhancedInitiate,
			Enhanced: EnhancedData{IRD: 4, ORD: 2, PeerToPeer: true, ReadRTR: true}}},
		{"enhanced accept", goldenEnhancedAccept, SessionControl{Function: FunctionEnhancedAccept,
			Enhanced: EnhancedData{IRD: 2, ORD: 4, PeerToPeer: true, ReadRTR: true}, PrivateData: []byte{0xAB}}},
		{"enhanced reject", goldenEnhancedReject, SessionControl{Function: FunctionEnhancedReject,
			Enhanced: EnhancedData{ORD: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); err != nil {
				t.Fatal(err)
			}
			if tt.m.Len() != len(tt.wire) {
				t.Fatalf("Len = %d, want %d", tt.m.Len(), len(tt.wire))
			}
			if got := tt.m.Append(nil); !bytes.Equal(got, tt.wire) {
				t.Fatalf("Append = % x, want % x", got, tt.wire)
			}
			got, n, err := ParseSessionControl(tt.wire)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tt.wire) || !sessionControlEqual(got, tt.m) {
				t.Fatalf("Parse = %+v (%d), want %+v", got, n, tt.m)
			}
		})
	}
}

func sessionControlEqual(a, b SessionControl) bool {
	return a.SSN == b.SSN && a.Function == b.Function && a.Enhanced == b.Enhanced &&
		bytes.Equal(a.PrivateData, b.PrivateData)
}

// TestSessionControlTruncated: prefixes shorter than the fixed part (4
// bytes, 8 for the enhanced codes) are rejected; as the message has no
// length field, a longer prefix is the same message with less Private
// Data. Messages without Private Data therefore reject every strict prefix.
func TestSessionControlTruncated(t *testing.T) {
	for _, wire := range [][]byte{goldenInitiate, goldenAcceptEmpty, goldenReject, goldenTerm,
		goldenEnhancedInitiate, goldenEnhancedAccept, goldenEnhancedReject} {
		fixed := 4
		if FunctionCode(uint16(wire[2])<<8 | uint16(wire[3])).Enhanced() {
			fixed = 8
		}
		for i := 0; i < len(wire); i++ {
			m, n, err := ParseSessionControl(wire[:i])
			if i < fixed {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("prefix %d of % x: err = %v, want ErrTruncated", i, wire, err)
				}
				continue
			}
			if err != nil || n != i || len(m.PrivateData) != i-fixed {
				t.Fatalf("prefix %d of % x: %+v %d %v", i, wire, m, n, err)
			}
		}
	}
	for _, wire := range [][]byte{goldenAcceptEmpty, goldenTerm, goldenEnhancedInitiate, goldenEnhancedReject} {
		for i := 0; i < len(wire); i++ {
			if _, _, err := ParseSessionControl(wire[:i]); err == nil {
				t.Fatalf("strict prefix %d of % x accepted", i, wire)
			}
		}
	}
}

func TestSessionControlUnknownFunctionCode(t *testing.T) {
	for _, fc := range []uint16{0x0000, 0x0008, 0x0100, 0xFFFE, 0xFFFF} {
		wire := []byte{0, 0, byte(fc >> 8), byte(fc)}
		_, n, err := ParseSessionControl(wire)
		if !errors.Is(err, ErrUnknownFunctionCode) || n != 0 {
			t.Errorf("function code %#04x: n=%d err=%v", fc, n, err)
		}
		m := SessionControl{Function: FunctionCode(fc)}
		if err := m.Validate(); !errors.Is(err, ErrUnknownFunctionCode) {
			t.Errorf("Validate %#04x: %v", fc, err)
		}
	}
	_, _, err := ParseSessionControl([]byte{0, 0, 0, 9})
	if err == nil || !strings.Contains(err.Error(), "0x0009") {
		t.Errorf("error should name the code: %v", err)
	}
}

func TestSessionControlPrivateDataLimits(t *testing.T) {
	pd512 := bytes.Repeat([]byte{7}, 512)
	pd513 := bytes.Repeat([]byte{7}, 513)
	pd508 := pd512[:508]
	pd509 := pd512[:509]

	ok := []SessionControl{
		{Function: FunctionInitiate, PrivateData: pd512},
		{Function: FunctionAccept, PrivateData: pd512},
		{Function: FunctionReject, PrivateData: pd512},
		{Function: FunctionEnhancedInitiate, PrivateData: pd508},
		{Function: FunctionEnhancedAccept, PrivateData: pd508},
		{Function: FunctionEnhancedReject, PrivateData: pd508},
	}
	for _, m := range ok {
		if err := m.Validate(); err != nil {
			t.Fatalf("%v with %d bytes: %v", m.Function, len(m.PrivateData), err)
		}
		wire := m.Append(nil)
		if len(wire) > MaxSessionControlLen {
			t.Fatalf("%d bytes > MaxSessionControlLen", len(wire))
		}
		if _, _, err := ParseSessionControl(wire); err != nil {
			t.Fatalf("%v: %v", m.Function, err)
		}
	}
	bad := []SessionControl{
		{Function: FunctionInitiate, PrivateData: pd513},
		{Function: FunctionEnhancedAccept, PrivateData: pd509}, // 4 + 509 > 512
	}
	for _, m := range bad {
		if err := m.Validate(); !errors.Is(err, ErrPrivateDataTooLong) {
			t.Fatalf("Validate %v/%d: %v", m.Function, len(m.PrivateData), err)
		}
		if _, _, err := ParseSessionControl(m.Append(nil)); !errors.Is(err, ErrPrivateDataTooLong) {
			t.Fatalf("Parse %v/%d: %v", m.Function, len(m.PrivateData), err)
		}
	}
}

func TestSessionControlTerminateWithPrivateData(t *testing.T) {
	_, _, err := ParseSessionControl([]byte{0, 1, 0, 4, 0xEE})
	if !errors.Is(err, ErrPrivateDataInTerminate) {
		t.Fatalf("err = %v", err)
	}
	m := SessionControl{Function: FunctionTerminate, PrivateData: []byte{1}}
	if err := m.Validate(); !errors.Is(err, ErrPrivateDataInTerminate) {
		t.Fatalf("Validate: %v", err)
	}
	if m.Len() != 4 || len(m.Append(nil)) != 4 {
		t.Fatal("Terminate must encode without Private Data")
	}
}

func TestSessionControlInvalidEnhanced(t *testing.T) {
	m := SessionControl{Function: FunctionEnhancedInitiate, Enhanced: EnhancedData{IRD: 0x4000}}
	if err := m.Validate(); !errors.Is(err, ErrInvalidIRDORD) {
		t.Fatalf("err = %v", err)
	}
	// The enhanced data of a non-enhanced code is not sent.
	m = SessionControl{Function: FunctionInitiate, Enhanced: EnhancedData{IRD: 0x4000}}
	if err := m.Validate(); err != nil || m.Len() != 4 {
		t.Fatalf("err = %v, Len = %d", err, m.Len())
	}
}

func TestFunctionCodeString(t *testing.T) {
	for fc := FunctionInitiate; fc <= FunctionEnhancedReject; fc++ {
		if s := fc.String(); !strings.Contains(s, "DDP Stream Session") {
			t.Errorf("%d: %q", fc, s)
		}
	}
	if FunctionCode(0x42).String() != "FunctionCode(0x0042)" {
		t.Error(FunctionCode(0x42).String())
	}
}

func TestParseSessionControlAllocs(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _, _, _ = ParseSessionControl(goldenEnhancedAccept) })
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

func FuzzParseSessionControl(f *testing.F) {
	for _, g := range [][]byte{goldenInitiate, goldenAcceptEmpty, goldenReject, goldenTerm,
		goldenEnhancedInitiate, goldenEnhancedAccept, goldenEnhancedReject} {
		f.Add(g)
	}
	f.Add([]byte{0, 0, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := ParseSessionControl(b)
		if err != nil {
			if n != 0 {
				t.Fatalf("error with n=%d", n)
			}
			return
		}
		if n != len(b) || m.Len() != n {
			t.Fatalf("n=%d Len=%d len(b)=%d", n, m.Len(), len(b))
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted message fails Validate: %v", err)
		}
		enc := m.Append(nil)
		m2, _, err := ParseSessionControl(enc)
		if err != nil || !sessionControlEqual(m, m2) {
			t.Fatalf("round trip: %+v -> % x -> %+v %v", m, enc, m2, err)
		}
		if !m.Function.Enhanced() || m.Enhanced.PeerToPeer {
			if !bytes.Equal(enc, b) {
				t.Fatalf("re-encoding % x differs from % x", enc, b)
			}
		}
	})
}
