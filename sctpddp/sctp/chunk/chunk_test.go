package chunk

import (
	"errors"
	"testing"
)

func TestIter(t *testing.T) {
	pkt := hexBytes(t, `
		13 88 13 88 00 00 00 01 00 00 00 00 # common header
		0b 00 00 04                         # COOKIE ACK
		00 03 00 11 00 00 00 01 00 00 00 00 00 00 00 10 61 00 00 00 # DATA, 1 byte, padding
		fe 05 00 06 01 02 00 00             # unknown type 0xFE (skip and report), 2 bytes
		03 00 00 10 00 00 00 00 00 00 10 00 00 00 00 00             # SACK
	`)
	SetPacketChecksum(pkt)
	it := Chunks(pkt)
	var types []Type
	var offs []int
	for it.Next() {
		types = append(types, it.Chunk().Type())
		offs = append(offs, it.Offset())
		if it.Chunk().Type() == 0xfe {
			c := it.Chunk()
			if c.Flags() != 5 || c.Length() != 6 || len(c.Value()) != 2 || len(c.Unpadded()) != 6 || len(c) != 8 {
				t.Errorf("unknown chunk: %x", c)
			}
			if a := c.Type().Unrecognized(); a.Stop() || !a.Report() {
				t.Errorf("0xFE: %v", a)
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	want := []Type{TypeCookieAck, TypeData, 0xfe, TypeSACK}
	wantOffs := []int{12, 16, 36, 44}
	for i := range want {
		if i >= len(types) || types[i] != want[i] || offs[i] != wantOffs[i] {
			t.Fatalf("chunks %v at %v, want %v at %v", types, offs, want, wantOffs)
		}
	}
	if it.Next() {
		t.Error("Next after the end")
	}
}

func TestParseEmpty(t *testing.T) {
	_, _, err := ParseSACK(nil)
	var ce *ChunkError
	if !errors.As(err, &ce) || ce.Type != TypeSACK || !errors.Is(err, ErrTruncated) {
		t.Errorf("ParseSACK(nil): %v", err)
	}
	if err.Error() != "sctp: SACK chunk at offset 0: truncated" {
		t.Errorf("message %q", err)
	}
}

func TestIterErrors(t *testing.T) {
	hdr := "00010002 00000000 00000000"
	for _, c := range []struct {
		name   string
		pkt    string
		chunks int
		want   error
		off    int
	}{
		{"header only", hdr, 0, nil, 0},
		{"11 bytes", "00010002 00000000 000000", 0, ErrTruncated, 0},
		{"3 bytes of chunk header", hdr + "0b0000", 0, ErrTruncated, 12},
		{"Chunk Length 3", hdr + "0b000003", 0, ErrLength, 12},
		{"Chunk Length 0", hdr + "0b000000 0b000004", 0, ErrLength, 12},
		{"chunk past the packet", hdr + "0b000004 0a000010 00000000", 1, ErrTruncated, 16},
		// RFC 9260 §3.2: the last chunk is padded like the others.
		{"last chunk without padding", hdr + "0a000005 ff", 0, ErrTruncated, 12},
		{"last chunk short of padding", hdr + "0a000005 ff0000", 0, ErrTruncated, 12},
		// "The receiver MUST ignore the padding bytes."
		{"padding not zero", hdr + "0a000005 ffeeddcc 0b000004", 2, nil, 0},
	} {
		it := Chunks(hexBytes(t, c.pkt))
		n := 0
		for it.Next() {
			n++
		}
		err := it.Err()
		if n != c.chunks || !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %d chunks, err %v; want %d, %v", c.name, n, err, c.chunks, c.want)
			continue
		}
		var ce *ChunkError
		if err != nil && err != ErrTruncated && (!errors.As(err, &ce) || ce.Offset != c.off) {
			t.Errorf("%s: %v, want a *ChunkError at offset %d", c.name, err, c.off)
		}
	}
}
