package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Raw is a view of one chunk as it lies in a packet: the chunk header, the
// Chunk Value and the padding that follows it (RFC 9260 §3.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Chunk Type   |  Chunk Flags  |         Chunk Length          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	\                                                               \
//	/                          Chunk Value                          /
//	\                                                               \
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A Raw comes from ParseRaw or Iter, which have checked its length; its
// accessors rely on that. It aliases the packet and is valid as long as the
// packet's buffer is.
type Raw []byte

const (
	chunkHeaderLen = 4

	// MaxChunkLength is the largest value the 16-bit Chunk Length field
	// holds. Append methods panic on a chunk whose length exceeds it: that
	// is a bug in the caller, never the result of peer input.
	MaxChunkLength = 0xFFFF
)

// Type returns the Chunk Type.
func (r Raw) Type() Type { return Type(r[0]) }

// Flags returns the Chunk Flags.
func (r Raw) Flags() uint8 { return r[1] }

// Length returns the Chunk Length field: header and value, no padding.
func (r Raw) Length() int { return int(binary.BigEndian.Uint16(r[2:])) }

// Value returns the Chunk Value, without padding.
func (r Raw) Value() []byte { return r[chunkHeaderLen:r.Length()] }

// Unpadded returns the chunk without its padding: the bytes an Unrecognized
// Chunk Type error cause carries ("the unrecognized chunk from the SCTP
// packet complete with Chunk Type, Chunk Flags, and Chunk Length", RFC 9260
// §3.3.10.6).
func (r Raw) Unpadded() []byte { return r[:r.Length()] }

// ParseRaw checks the chunk at the start of b and returns it with its
// padding, and the number of bytes it occupies.
//
// The Chunk Length must be at least 4 and the chunk and its padding must lie
// within b. RFC 9260 §3.2: "The total length of a chunk (including Type,
// Length, and Value fields) MUST be a multiple of 4 bytes. If the length of
// the chunk is not a multiple of 4 bytes, the sender MUST pad the chunk with
// all zero bytes, and this padding is not included in the Chunk Length
// field." This holds for the last chunk of a packet too, so a packet that
// ends inside a chunk's padding is rejected (as Linux and pion/sctp do). The
// value of the padding is not checked: "The receiver MUST ignore the padding
// bytes."
func ParseRaw(b []byte) (Raw, int, error) { return parseRaw(b, 0) }

func parseRaw(b []byte, off int) (Raw, int, error) {
	b = b[off:]
	if len(b) < chunkHeaderLen {
		var t Type
		if len(b) > 0 {
			t = Type(b[0])
		}
		return nil, 0, chunkErr(t, off, ErrTruncated)
	}
	t := Type(b[0])
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < chunkHeaderLen {
		return nil, 0, chunkErr(t, off, ErrLength)
	}
	n := padLen(l)
	if n > len(b) {
		return nil, 0, chunkErr(t, off, ErrTruncated)
	}
	return Raw(b[:n]), n, nil
}

// parseChunk checks that b starts with a chunk of type want whose Chunk
// Length is at least minLen, and returns its flags, its value and the
// number of bytes it occupies with its padding.
func parseChunk(b []byte, want Type, minLen int) (flags uint8, value []byte, n int, err error) {
	if len(b) > 0 && Type(b[0]) != want {
		return 0, nil, 0, chunkErr(Type(b[0]), 0, ErrWrongType)
	}
	r, n, err := ParseRaw(b)
	if err != nil {
		// The type is want's, or b is empty: name the chunk expected.
		return 0, nil, 0, chunkErr(want, 0, errors.Unwrap(err))
	}
	if r.Length() < minLen {
		return 0, nil, 0, chunkErr(want, 0, ErrLength)
	}
	return r.Flags(), r.Value(), n, nil
}

// parseFixedChunk is parseChunk for a chunk whose Chunk Length has one
// value only.
func parseFixedChunk(b []byte, want Type, length int) (flags uint8, value []byte, n int, err error) {
	flags, value, n, err = parseChunk(b, want, length)
	if err == nil && len(value) != length-chunkHeaderLen {
		return 0, nil, 0, chunkErr(want, 0, ErrLength)
	}
	return flags, value, n, err
}

// appendChunkHeader appends a chunk header for a chunk of length bytes
// (header and value, no padding).
func appendChunkHeader(b []byte, t Type, flags uint8, length int) []byte {
	if length > MaxChunkLength {
		// A programming error of the caller, who builds the chunk from its
		// own data: no value received from a peer reaches here.
		panic(fmt.Sprintf("sctp: %v chunk of %d bytes exceeds the Chunk Length field (a programming error of the caller)", t, length))
	}
	return append(b, byte(t), flags, byte(length>>8), byte(length))
}

// appendChunk appends a chunk whose value is value, with its padding.
func appendChunk(b []byte, t Type, flags uint8, value []byte) []byte {
	l := chunkHeaderLen + len(value)
	b = appendChunkHeader(b, t, flags, l)
	b = append(b, value...)
	return appendPad(b, l)
}

// Iter iterates over the chunks of a packet without allocating:
//
//	it := chunk.Chunks(packet)
//	for it.Next() {
//		c := it.Chunk()
//		switch c.Type() { ... }
//	}
//	if err := it.Err(); err != nil { ... }
//
// Each chunk's length is checked as ParseRaw does before it is handed out;
// the chunk's own fields are checked by the ParseX function of its type.
// Chunks of unknown types are handed out like the others, for the
// association to act on Type.Unrecognized.
type Iter struct {
	b      []byte
	off    int
	cur    Raw
	curOff int
	err    error
}

// Chunks returns an iterator over the chunks that follow the common header
// of packet. A packet shorter than a common header yields no chunk, and Err
// returns ErrTruncated itself.
func Chunks(packet []byte) Iter {
	if len(packet) < HeaderLen {
		return Iter{err: ErrTruncated}
	}
	return Iter{b: packet, off: HeaderLen}
}

// Next advances to the next chunk. It returns false at the end of the
// packet or at a malformed chunk, after which Err tells which.
func (it *Iter) Next() bool {
	if it.err != nil || it.off >= len(it.b) {
		return false
	}
	r, n, err := parseRaw(it.b, it.off)
	if err != nil {
		it.err = err
		it.cur = nil
		return false
	}
	it.cur, it.curOff = r, it.off
	it.off += n
	return true
}

// Chunk returns the current chunk, with its padding.
func (it *Iter) Chunk() Raw { return it.cur }

// Offset returns where the current chunk starts in the packet.
func (it *Iter) Offset() int { return it.curOff }

// Err returns the error that stopped the iteration, or nil at the end of a
// well-formed packet. It is a *ChunkError whose Offset is the malformed
// chunk's offset in the packet, or ErrTruncated for a packet shorter than
// a common header.
func (it *Iter) Err() error { return it.err }
