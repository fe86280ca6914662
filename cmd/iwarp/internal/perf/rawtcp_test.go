package perf

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

// choppy reads its bytes in pieces of random length.
type choppy struct {
	b   []byte
	rng *rand.Rand
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rng.IntN(3*(1+len(c.b)/2)))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// TestPerfRawTCPStream: what msgWriter writes, msgReader reads back and
// checks, whatever the message size (copied, gathered, longer than the
// source buffer), the shape and how the reads cut the stream.
func TestPerfRawTCPStream(t *testing.T) {
	src := pattern(RawBufLen)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 2, 64, 4095, gatherMin - 1, gatherMin, 65536, RawBufLen, RawBufLen + 3, 3*RawBufLen + 1} {
		for _, crc := range []bool{true, false} {
			for _, gather := range []bool{false, true} {
				var out bytes.Buffer
				count := max(1, min(50, (4<<20)/size))
				w := newMsgWriterShape(&out, src, make([]byte, 0, max(RawBufLen, size+4)), size, crc, gather, 256<<10)
				if err := w.write(count); err != nil {
					t.Fatal(err)
				}
				trailer := 0
				if crc {
					trailer = 4
				}
				if out.Len() != count*(size+trailer) || w.n != out.Len() {
					t.Fatalf("size %d crc %v gather %v: %d octets written (counted %d), want %d", size, crc, gather, out.Len(), w.n, count*(size+trailer))
				}
				// The stream is messages of the pattern and their CRCs.
				msg := pattern(size)
				if size > RawBufLen {
					for i := range msg {
						msg[i] = src[i%RawBufLen]
					}
				}
				if !bytes.Equal(out.Bytes()[:size], msg) {
					t.Fatalf("size %d: not the pattern", size)
				}
				if crc && crc32.Checksum(msg, castagnoli) != leUint32(out.Bytes()[size:]) {
					t.Fatalf("size %d: wrong CRC", size)
				}
				r := newMsgReader(&choppy{b: out.Bytes(), rng: rng}, make([]byte, 1+rng.IntN(RawBufLen)), size, crc)
				if err := r.read(count); err != nil {
					t.Fatalf("size %d crc %v gather %v: %v", size, crc, gather, err)
				}
				if r.n != out.Len() {
					t.Fatalf("read %d of %d", r.n, out.Len())
				}
			}
		}
	}
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func TestPerfRawTCPCRCMismatch(t *testing.T) {
	var out bytes.Buffer
	w := newMsgWriter(&out, pattern(RawBufLen), make([]byte, 0, RawBufLen), 100, true)
	if err := w.write(3); err != nil {
		t.Fatal(err)
	}
	b := out.Bytes()
	b[2*104+50] ^= 1 // the third message
	r := newMsgReader(bytes.NewReader(b), make([]byte, 64), 100, true)
	if err := r.read(3); !errors.Is(err, ErrRawCRC) {
		t.Fatalf("a corrupted message read as %v", err)
	}
	r = newMsgReader(bytes.NewReader(b[:150]), make([]byte, 64), 100, true)
	if err := r.read(2); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a short stream read as %v", err)
	}
}

// TestPerfRawTCPAllocs: the movers allocate nothing per message.
func TestPerfRawTCPAllocs(t *testing.T) {
	src := pattern(RawBufLen)
	for _, size := range []int{64, 65536} {
		w := newMsgWriter(io.Discard, src, make([]byte, 0, RawBufLen), size, true)
		if n := testing.AllocsPerRun(100, func() { w.write(20) }); n != 0 {
			t.Errorf("writer, %d octets: %v allocations per batch", size, n)
		}
		var out bytes.Buffer
		newMsgWriter(&out, src, make([]byte, 0, RawBufLen), size, true).write(20)
		stream := out.Bytes()
		rd := bytes.NewReader(stream)
		r := newMsgReader(rd, make([]byte, RawBufLen), size, true)
		if n := testing.AllocsPerRun(100, func() {
			rd.Reset(stream)
			r.read(20)
		}); n != 0 {
			t.Errorf("reader, %d octets: %v allocations per batch", size, n)
		}
	}
}
