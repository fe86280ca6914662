package chunk

import (
	"bytes"
	"testing"
)

func TestData(t *testing.T) {
	golden := hexBytes(t, `
		00 03 00 13 # Type 0, flags B|E, Length 19 (16 + 3 bytes of user data)
		12 34 56 78 # TSN
		00 07 00 2a # Stream Identifier 7, Stream Sequence Number 42
		00 00 00 10 # PPID 16 (RFC 5043 DDP Segment Chunk)
		61 62 63 00 # user data "abc", one byte of padding
	`)
	want := Data{
		Flags:    FlagBeginning | FlagEnding,
		TSN:      0x12345678,
		StreamID: 7,
		SSN:      42,
		PPID:     16,
		UserData: []byte("abc"),
	}
	checkChunk(t, golden, want, ParseData)
}

func TestDataFlags(t *testing.T) {
	d := Data{Flags: FlagImmediate | FlagUnordered | FlagBeginning | FlagEnding | 0xf0, UserData: []byte{1}}
	b := d.Append(nil)
	if b[1] != 0x0f {
		t.Errorf("flags on the wire %#x, want 0x0f: the Res bits are sent as 0", b[1])
	}
	b[1] = 0xff // Res bits set by a peer are ignored on receipt
	got, _, err := ParseData(b)
	if err != nil || got.Flags != 0x0f {
		t.Errorf("ParseData: flags %#x, err %v", got.Flags, err)
	}
}

func TestDataNoUserData(t *testing.T) {
	b := Data{TSN: 99, StreamID: 1, SSN: 2, PPID: 17}.Append(nil)
	if len(b) != 16 {
		t.Fatalf("empty DATA encodes to %d bytes", len(b))
	}
	d, n, err := ParseData(b)
	wantErr(t, "DATA with Length 16", err, ErrNoUserData)
	if d.TSN != 99 || n != 16 {
		t.Errorf("DATA without user data: TSN %d n %d, want the header fields for the No User Data cause", d.TSN, n)
	}
}

func TestDataAppendReserve(t *testing.T) {
	for n := range 9 {
		d := Data{Flags: FlagBeginning, TSN: 5, StreamID: 3, SSN: 1, PPID: 16}
		buf := bytes.Repeat([]byte{0xee}, 64)[:0]
		b, slot := d.AppendReserve(buf, n)
		if len(slot) != n || cap(slot) != n {
			t.Fatalf("n=%d: slot len %d cap %d", n, len(slot), cap(slot))
		}
		for i := range slot {
			slot[i] = byte(i + 1)
		}
		d.UserData = slot
		if want := d.Append(nil); !bytes.Equal(b, want) {
			t.Errorf("n=%d: reserve then fill gives %x, want %x", n, b, want)
		}
		if &b[0] != &buf[:1][0] {
			t.Errorf("n=%d: AppendReserve reallocated a buffer with room", n)
		}
	}
}
