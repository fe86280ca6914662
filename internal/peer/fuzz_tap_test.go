package peer

import (
	"reflect"
	"testing"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// tapStream is one direction of an MPA connection: a startup frame, then
// FPDUs of the ulpdus with the options o, counted from the first octet
// after the frame (RFC 5044 §4.3).
func tapStream(f mpa.Frame, o mpa.Options, ulpdus ...[]byte) []byte {
	b := f.Append(nil)
	start := len(b)
	for _, u := range ulpdus {
		var err error
		if b, err = mpa.AppendFPDU(b, uint64(len(b)-start), o, u); err != nil {
			panic(err)
		}
	}
	return b
}

func tapWrite(stag uint32, to uint64, payload string) []byte {
	h := ddp.Header{Tagged: true, Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpWrite))}, STag: stag, TO: to}
	return append(h.Append(nil), payload...)
}

func tapSend(msn uint32, payload string) []byte {
	h := ddp.Header{Last: true, DV: 1, RsvdULP: [5]byte{byte(rdmap.MakeControl(rdmap.OpSend))}, QN: rdmap.QNSend, MSN: msn}
	return append(h.Append(nil), payload...)
}

// tapFeed plays both directions into a new Tap: each octet of chunks
// sends the next 1 to 128 octets (its low seven bits, plus one) of the
// local stream (high bit clear) or the remote one (set), the other when
// that one is used up; no chunks: each stream whole, the local one first
// unless remoteFirst. after runs after each Observe.
func tapFeed(initiator bool, local, remote, chunks []byte, remoteFirst bool, after func(*Tap)) (events [2][]Event) {
	tap := NewTap(initiator, func(e Event) {
		i := 1
		if e.Out {
			i = 0
		}
		events[i] = append(events[i], e)
	})
	streams := [2][]byte{local, remote}
	for k := 0; len(streams[0])+len(streams[1]) > 0; k++ {
		i := 0
		if remoteFirst {
			i = 1
		}
		n := len(streams[i])
		if len(chunks) > 0 {
			c := chunks[k%len(chunks)]
			i, n = int(c>>7), int(c&0x7f)+1
		}
		if len(streams[i]) == 0 {
			i = 1 - i
			if len(chunks) == 0 {
				n = len(streams[i])
			}
		}
		n = min(n, len(streams[i]))
		tap.Observe(i == 0, streams[i][:n])
		streams[i] = streams[i][n:]
		if after != nil {
			after(tap)
		}
	}
	return events
}

// maxFPDUWire is the most octets an FPDU takes on the stream: the
// largest ULPDU, its length field, PAD and CRC, and a Marker in every 512
// octets and before it.
const maxFPDUWire = 2 + mpa.MaxULPDU + 3 + mpa.CRCLen + (2+mpa.MaxULPDU+3+mpa.CRCLen)/508*4 + 8

// checkTapHolds checks what a Tap holds between two Observes: less than
// a startup frame before its frame, less than one FPDU in Full
// Operation, nothing once the connection is rejected, and at most
// maxTapWait octets while the other direction's frame has not come.
func checkTapHolds(t *testing.T, tap *Tap) {
	t.Helper()
	tap.mu.Lock()
	defer tap.mu.Unlock()
	for i := range tap.dirs {
		d := &tap.dirs[i]
		switch {
		case d.failed:
		case !d.framed:
			if len(d.buf) >= mpa.MaxFrameLen {
				t.Fatalf("direction %d holds %d octets and no frame", i, len(d.buf))
			}
		case tap.full && tap.rep.Reject:
			if len(d.buf) > 0 {
				t.Fatalf("direction %d holds %d octets of a rejected connection", i, len(d.buf))
			}
		case tap.full:
			if n, ok := mpa.FPDULen(d.buf, d.pos, tap.opts[i]); ok && len(d.buf) >= n || len(d.buf) >= maxFPDUWire {
				t.Fatalf("direction %d holds %d octets, a whole FPDU", i, len(d.buf))
			}
		default:
			if len(d.buf) > maxTapWait {
				t.Fatalf("direction %d holds %d octets while the other's frame has not come", i, len(d.buf))
			}
		}
	}
}

// tapComparable is an Event with its Error reduced to whether there is
// one: the text of a startup frame's error quotes what had arrived.
func tapComparable(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		if e.Error != "" {
			e.Error = "error"
		}
		out[i] = e
	}
	return out
}

// FuzzTap feeds the two directions of an MPA connection to a Tap cut
// into chunks and interleaved as the input says, and checks that each
// direction's events are those of the whole streams fed at once (in
// either order); that they lie inside the stream: a startup frame, then
// FPDUs numbered from 0, each beginning where the last ended, whose
// octets ParseFPDU reads to an ULPDU of the reported length, with their
// Markers where RFC 5044 §4.3 puts them; and that the Tap never holds
// more than it must (checkTapHolds).
func FuzzTap(f *testing.F) {
	req := mpa.Frame{Markers: true, CRC: true, Rev: 1}
	rep := mpa.Frame{Reply: true, Markers: true, CRC: true, Rev: 1, PrivateData: []byte("ok")}
	both := mpa.Options{Markers: true, CRC: true}
	long := string(make([]byte, 1200))
	f.Add(true, tapStream(req, both, tapWrite(0x100, 8, "hello"), tapSend(1, long)), tapStream(rep, both, tapSend(1, "hi")), []byte{0x05, 0x83, 0x7f, 0xff}, uint8(0))
	f.Add(false, tapStream(rep, both, tapSend(1, "hi"), tapSend(2, long)), tapStream(req, both, tapWrite(0x100, 0, long)), []byte{}, uint8(0))
	plain := mpa.Options{}
	f.Add(true, tapStream(mpa.Frame{Rev: 1}, plain, tapWrite(1, 2, "x"), tapSend(1, "")), tapStream(mpa.Frame{Reply: true, Rev: 1}, plain, tapSend(1, "y")), []byte{0x00}, uint8(0))
	crcOnly := mpa.Options{CRC: true}
	enh := mpa.Frame{CRC: true, Rev: 2, Enhanced: true, PrivateData: []byte{0x80, 0x10, 0x40, 0x08}}
	f.Add(true, tapStream(enh, crcOnly, tapWrite(7, 0, "z")), tapStream(mpa.Frame{Reply: true, CRC: true, Rev: 2}, crcOnly, tapSend(1, "w")), []byte{0x01, 0x81}, uint8(0))
	// Rejected: nothing after the frames is read.
	f.Add(true, tapStream(req, both), tapStream(mpa.Frame{Reply: true, Reject: true, Rev: 1}, both, tapSend(1, long)), []byte{0x90}, uint8(0))
	// A bad CRC, a ULPDU_Length of 0, a bad Key, Private Data too long.
	bad := tapStream(req, both, tapSend(1, "corrupt me"))
	bad[len(bad)-1] ^= 1
	f.Add(true, bad, tapStream(rep, both), []byte{0x03}, uint8(0))
	f.Add(true, append(req.Append(nil), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), rep.Append(nil), []byte{}, uint8(0))
	f.Add(true, []byte("MPA ID Rex Frame\x00\x01\x00\x00"), rep.Append(nil), []byte{0x02}, uint8(0))
	f.Add(true, []byte("MPA ID Req Frame\x00\x01\x02\x01"), rep.Append(nil), []byte{}, uint8(0))
	// Full Operation never comes: the remote's frame is missing.
	f.Add(true, tapStream(req, both, tapSend(1, long), tapSend(2, long)), []byte{}, []byte{0x7f}, uint8(0))
	f.Fuzz(func(t *testing.T, initiator bool, local, remote, chunks []byte, _ uint8) {
		got := tapFeed(initiator, local, remote, chunks, false, func(tap *Tap) { checkTapHolds(t, tap) })
		whole := tapFeed(initiator, local, remote, nil, false, nil)
		swapped := tapFeed(initiator, local, remote, nil, true, nil)
		for i, stream := range [2][]byte{local, remote} {
			checkTapEvents(t, i, stream, got[i])
			if len(local) > maxTapWait || len(remote) > maxTapWait {
				continue // which direction waits too long depends on the order
			}
			if !reflect.DeepEqual(tapComparable(got[i]), tapComparable(whole[i])) {
				t.Fatalf("direction %d, chunked:\n%+v\nwhole:\n%+v", i, got[i], whole[i])
			}
			if !reflect.DeepEqual(tapComparable(swapped[i]), tapComparable(whole[i])) {
				t.Fatalf("direction %d, the other direction first:\n%+v\nwhole:\n%+v", i, swapped[i], whole[i])
			}
		}
	})
}

// checkTapEvents checks one direction's events against its stream.
func checkTapEvents(t *testing.T, dir int, stream []byte, evs []Event) {
	t.Helper()
	if len(evs) == 0 {
		return
	}
	if evs[0].Kind != "mpa-frame" {
		t.Fatalf("direction %d begins with %+v", dir, evs[0])
	}
	if evs[0].Error != "" {
		if len(evs) > 1 {
			t.Fatalf("direction %d: events after a bad frame: %+v", dir, evs[1:])
		}
		return
	}
	frameLen := int(evs[0].Len)
	f, n, err := mpa.ParseFrame(stream)
	if err != nil || n != frameLen || evs[0].Text != f.String() {
		t.Fatalf("direction %d: frame %+v, ParseFrame %v %d %v", dir, evs[0], f, n, err)
	}
	var pos uint64
	for k, e := range evs[1:] {
		if e.Kind != "fpdu" || e.Out != (dir == 0) {
			t.Fatalf("direction %d: event %d is %+v, want an FPDU", dir, k+1, e)
		}
		if e.Error != "" {
			if k+2 < len(evs) {
				t.Fatalf("direction %d: events after a bad FPDU: %+v", dir, evs[k+2:])
			}
			break
		}
		end := frameLen + int(pos) + e.Wire
		if e.Seq != uint32(k) || e.Pos != pos || e.Wire <= 0 || end > len(stream) || e.ULPDU > e.Wire {
			t.Fatalf("direction %d: FPDU %+v, want number %d at %d inside a stream of %d octets", dir, e, k, pos, len(stream)-frameLen)
		}
		// The options are not in the events: Markers tell from their
		// offsets (none: the FPDU spans no Marker position, and reads
		// the same without), CRC from the text.
		o := mpa.Options{Markers: e.Markers != nil, CRC: e.Text != "CRC not in use (zero or ignored)"}
		u, m, err := mpa.ParseFPDU(nil, stream[frameLen+int(pos):end], pos, o)
		if err != nil || m != e.Wire || len(u) != e.ULPDU {
			t.Fatalf("direction %d: FPDU %+v, ParseFPDU %d octets of %d, %v", dir, e, len(u), m, err)
		}
		for _, off := range e.Markers {
			if off >= e.Wire || (pos+uint64(off))%mpa.MarkerInterval != 0 {
				t.Fatalf("direction %d: FPDU at %d has a Marker at %d", dir, pos, off)
			}
		}
		pos += uint64(e.Wire)
	}
}

// TestTapBounded: a direction that sends FPDUs while the other end's
// startup frame never comes is held to maxTapWait octets, then reported
// as failed; a rejected connection's octets are not kept.
func TestTapBounded(t *testing.T) {
	req := mpa.Frame{CRC: true, Rev: 1}
	var local []byte
	for len(local) <= maxTapWait+mpa.MaxFrameLen {
		local = tapStream(req, mpa.Options{CRC: true}, tapSend(1, string(make([]byte, 4000))))
		for len(local) <= maxTapWait+mpa.MaxFrameLen {
			local = append(local, local[req.Len():]...)
		}
	}
	var held int
	evs := tapFeed(true, local, nil, []byte{0x7f}, false, func(tap *Tap) {
		checkTapHolds(t, tap)
		held = max(held, len(tap.dirs[0].buf))
	})
	if n := len(evs[0]); n != 2 || evs[0][1].Error == "" {
		t.Fatalf("events %+v, want the frame and an error", evs[0])
	}
	if held > maxTapWait+128 {
		t.Fatalf("held %d octets", held)
	}
	rejected := tapFeed(true, req.Append(nil), tapStream(mpa.Frame{Reply: true, Reject: true, Rev: 1}, mpa.Options{}, tapSend(1, "after the reject")), nil, false, func(tap *Tap) { checkTapHolds(t, tap) })
	if len(rejected[1]) != 1 {
		t.Fatalf("a rejected connection gave %+v", rejected[1])
	}
}
