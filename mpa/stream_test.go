package mpa

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
)

// Helpers shared by the Writer and Reader tests.

// chunkReader returns b in pieces of the given sizes, cycling through
// them; a size of 0 makes one Read return (0, nil).
type chunkReader struct {
	b     []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = copy(p, c.b[:min(n, len(c.b))])
	c.b = c.b[n:]
	return n, nil
}

// loopReader repeats b forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

// segment is one ULPDU split as a caller of WriteFPDU would split it.
type segment struct {
	hdr     []byte
	payload [][]byte
}

func (s segment) ulpdu() []byte {
	u := append([]byte(nil), s.hdr...)
	for _, p := range s.payload {
		u = append(u, p...)
	}
	return u
}

// randomSegment makes a DDP-looking ULPDU of hdr+payload octets: a tagged
// (14) or untagged (18) header and payload split into up to 4 slices.
func randomSegment(rng *rand.Rand, payloadLen int) segment {
	var s segment
	if rng.IntN(2) == 0 {
		s.hdr = make([]byte, 14)
		s.hdr[0] = 0xC1 // T=1 L=1 DV=1
		s.hdr[1] = 0x40 // RDMA Write
	} else {
		s.hdr = make([]byte, 18)
		s.hdr[0] = 0x41 // T=0 L=1 DV=1
		s.hdr[1] = 0x43 // Send
		binary.BigEndian.PutUint32(s.hdr[10:], rng.Uint32())
	}
	p := make([]byte, payloadLen)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	for len(p) > 0 {
		n := rng.IntN(len(p) + 1)
		if rng.IntN(4) == 0 {
			n = len(p)
		}
		s.payload = append(s.payload, p[:n])
		p = p[n:]
	}
	if rng.IntN(3) == 0 {
		s.payload = append(s.payload, nil) // an empty slice is fine
	}
	return s
}

// encodeAll encodes segs with AppendFPDU from SeqStart.
func encodeAll(segs []segment, o Options) []byte {
	var b []byte
	for _, s := range segs {
		var err error
		b, err = AppendFPDU(b, uint64(len(b)), o, s.ulpdu())
		if err != nil {
			panic(err)
		}
	}
	return b
}
