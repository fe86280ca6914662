package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// ngSection is a little-endian pcapng Section Header Block and one
// Interface Description Block with the given snapshot length.
func ngSection(snap uint32) []byte {
	le := binary.LittleEndian
	var shb []byte
	shb = le.AppendUint32(shb, ngBOM)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0))
	var idb []byte
	idb = le.AppendUint16(idb, uint16(LinkEthernet))
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, snap)
	return append(ngBlock(le, ngSHB, shb), ngBlock(le, ngIDB, idb)...)
}

// classicPcap is a little-endian pcap file header and one record header
// with the given lengths, followed by four octets of data.
func classicPcap(incl, orig uint32) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, pcapMagicMicro)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0xffffffff) // snaplen
	b = le.AppendUint32(b, uint32(LinkEthernet))
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 2)
	b = le.AppendUint32(b, incl)
	b = le.AppendUint32(b, orig)
	return append(b, 1, 2, 3, 4)
}

// TestReaderLengthFields gives every length field the reader trusts
// values at and above 2^31, which are negative as a 32-bit int: each is
// an error wrapping ErrFormat, never a panic, on every build.
func TestReaderLengthFields(t *testing.T) {
	le := binary.LittleEndian
	spb := func(orig uint32) []byte {
		return append(ngSection(0), ngBlock(le, ngSPB, le.AppendUint32(nil, orig))...)
	}
	epb := func(id, capLen, orig uint32) []byte {
		var b []byte
		b = le.AppendUint32(b, id)
		b = le.AppendUint64(b, 0)
		b = le.AppendUint32(b, capLen)
		b = le.AppendUint32(b, orig)
		b = append(b, 1, 2, 3, 4)
		return append(ngSection(0), ngBlock(le, ngEPB, b)...)
	}
	blockLen := func(total uint32) []byte {
		b := ngSection(0)
		b = le.AppendUint32(b, ngEPB)
		b = le.AppendUint32(b, total)
		return append(b, make([]byte, 64)...)
	}
	shbLen := func(total uint32) []byte {
		b := ngSection(0)
		binary.LittleEndian.PutUint32(b[4:8], total)
		return b
	}
	cases := map[string][]byte{
		"SPB original length 2^31":    spb(1 << 31),
		"SPB original length 2^32-1":  spb(0xffffffff),
		"EPB captured length 2^31":    epb(0, 1<<31, 4),
		"EPB captured length 2^32-1":  epb(0, 0xffffffff, 4),
		"EPB original length 2^31":    epb(0, 4, 1<<31),
		"EPB interface 2^31":          epb(1<<31, 4, 4),
		"EPB interface 2^32-1":        epb(0xffffffff, 4, 4),
		"block length 2^31":           blockLen(1 << 31),
		"block length 2^32-4":         blockLen(0xfffffffc),
		"SHB length 2^31":             shbLen(1 << 31),
		"SHB length 2^32-4":           shbLen(0xfffffffc),
		"pcap captured length 2^31":   classicPcap(1<<31, 4),
		"pcap captured length 2^32-1": classicPcap(0xffffffff, 4),
		"pcap original length 2^31":   classicPcap(4, 1<<31),
	}
	for name, b := range cases {
		r, err := NewReader(bytes.NewReader(b))
		for err == nil {
			_, err = r.Next()
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want an error wrapping ErrFormat", name, err)
		}
	}
}

// TestReaderSnapshotLength: an interface's snapshot length at or above
// 2^31 limits nothing, and a Simple Packet Block's data is the smallest
// of its original length, its room and the snapshot length.
func TestReaderSnapshotLength(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		snap, orig uint32
		want       int
	}{
		{0, 6, 6},
		{0, 2, 2},
		{0xffffffff, 6, 6},
		{1 << 31, 6, 6},
		{3, 6, 3},
		{0, 1<<31 - 1, 8}, // the block's room: six octets and two of padding
	} {
		body := le.AppendUint32(nil, tc.orig)
		body = append(body, 1, 2, 3, 4, 5, 6)
		b := append(ngSection(tc.snap), ngBlock(le, ngSPB, body)...)
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.Next()
		if err != nil || len(p.Data) != tc.want || p.OrigLen != int(tc.orig) {
			t.Errorf("snap %d orig %d: %d octets, original %d, %v; want %d octets", tc.snap, tc.orig, len(p.Data), p.OrigLen, err, tc.want)
		}
	}
}
