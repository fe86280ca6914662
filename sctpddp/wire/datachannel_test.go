package wire

import "testing"

// The kind of every message this package sends is recovered from its
// content: session control with every defined function code, DDP
// Segments with every DDP Control Field of DDP Version 01b.
func TestDataChannelPPID(t *testing.T) {
	golden := []struct {
		name string
		msg  []byte
		want PPID
	}{
		{"Initiate", []byte{0x00, 0x00, 0x00, 0x01}, PPIDSessionControl},
		{"Enhanced Accept with IRD/ORD", []byte{0x00, 0x00, 0x00, 0x06, 0x00, 0x04, 0x00, 0x04}, PPIDSessionControl},
		{"Terminate with DDP-SSN 0x1234", []byte{0x12, 0x34, 0x00, 0x04}, PPIDSessionControl},
		{"tagged, last", []byte{0x00, 0x01, 0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, PPIDSegment},
		{"untagged, not last", []byte{0x00, 0x01, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, PPIDSegment},
		{"experimental function code", []byte{0x00, 0x00, 0xff, 0xff}, PPIDSegment},
		{"empty", nil, PPIDSegment},
		{"DDP-SSN only", []byte{0x00, 0x00}, PPIDSegment},
	}
	for _, g := range golden {
		if got := DataChannelPPID(g.msg); got != g.want {
			t.Errorf("%s: %v, want %v", g.name, got, g.want)
		}
	}
	for f := FunctionInitiate; f <= FunctionEnhancedReject; f++ {
		m := SessionControl{SSN: 0xfffe, Function: f}
		if f != FunctionTerminate {
			m.PrivateData = []byte{0xc1}
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := DataChannelPPID(m.Append(nil)); got != PPIDSessionControl {
			t.Errorf("%v reads as %v", f, got)
		}
	}
	for c := 0; c < 256; c++ {
		seg := SegmentChunk{SSN: 1, Segment: make([]byte, 18)}
		seg.Segment[0] = byte(c)
		got := DataChannelPPID(seg.Append(nil))
		if framable := DataChannelFramable(seg.Segment); framable != (c&0x03 == 0x01) {
			t.Errorf("DDP Control Field %#02x: framable %v", c, framable)
		}
		if DataChannelFramable(seg.Segment) && got != PPIDSegment {
			t.Errorf("DDP Control Field %#02x reads as %v", c, got)
		}
		if (got == PPIDSessionControl) != (c == 0) {
			t.Errorf("DDP Control Field %#02x reads as %v", c, got)
		}
	}
}

func FuzzDataChannelPPID(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{0, 1, 0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		switch DataChannelPPID(msg) {
		case PPIDSessionControl:
			// A message with a defined function code parses as one.
			if m, n, err := ParseSessionControl(msg); err == nil && (n != len(msg) || !m.Function.Known()) {
				t.Fatalf("parsed %d of %d bytes, %v", n, len(msg), m.Function)
			}
		case PPIDSegment:
			// Never a defined function code in the third and fourth octets.
			if len(msg) >= 4 && FunctionCode(uint16(msg[2])<<8|uint16(msg[3])).Known() {
				t.Fatalf("session control % x read as a segment", msg[:4])
			}
		default:
			t.Fatal("neither kind")
		}
	})
}
