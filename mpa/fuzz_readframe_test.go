package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/iwarpgo/iwarp/term"
)

// frameReader is the peer's side of the stream ReadFrame reads: it hands
// out b in reads of the sizes in chunks (cycled; a size of 0 is a read
// that returns no octets and no error), then returns end. With eofWithData
// the last octets come with end in the same Read, as io.Reader allows. It
// records how many octets were asked for beyond what the frame holds.
type frameReader struct {
	b           []byte
	chunks      []byte
	i           int
	end         error
	eofWithData bool

	frameLen int // the frame's length, as its header gives it
	read     int // octets handed out
	overAsk  int // the most octets a Read asked for past frameLen
	zeros    int // zero-length reads in a row
}

func (r *frameReader) Read(p []byte) (int, error) {
	r.overAsk = max(r.overAsk, r.read+len(p)-r.frameLen)
	if len(r.b) == 0 {
		return 0, r.end
	}
	n := len(p)
	if len(r.chunks) > 0 {
		c := int(r.chunks[r.i%len(r.chunks)])
		r.i++
		if c == 0 && r.zeros < 3 {
			r.zeros++
			return 0, nil
		}
		n = min(n, max(c, 1))
	}
	r.zeros = 0
	n = copy(p, r.b[:min(n, len(r.b))])
	r.b = r.b[n:]
	r.read += n
	if len(r.b) == 0 && r.eofWithData {
		return n, r.end
	}
	return n, nil
}

// frameLenOf is the length of the frame b begins with as far as its
// header tells: FrameHeaderLen plus PD_Length, or FrameHeaderLen if b is
// shorter than the header.
func frameLenOf(b []byte) int {
	if len(b) < FrameHeaderLen {
		return FrameHeaderLen
	}
	return FrameHeaderLen + int(binary.BigEndian.Uint16(b[18:20]))
}

// errConnReset stands for the loss of the TCP connection.
var errConnReset = errors.New("connection reset by peer")

// FuzzReadFrame feeds a stream to ReadFrame through readers that return
// short reads (one octet at a time, chunks of the sizes the input gives,
// the last octets with the error) and checks it against ParseFrame on the
// same octets: the same frame when ParseFrame takes one; when the stream
// ends inside a frame ParseFrame calls short, io.EOF before the first
// octet and otherwise the loss of the connection (term.MPAConnectionLost,
// wrapping the stream's error); the same invalid-frame error otherwise.
// ReadFrame never asks the stream for an octet past the frame its header
// describes, and the Private Data it returns holds exactly PD_Length
// octets of memory.
func FuzzReadFrame(f *testing.F) {
	for _, tc := range frameGolden {
		f.Add(tc.wire, []byte{1}, uint8(0))
		f.Add(append(bytes.Clone(tc.wire), 0xee, 0xff), []byte{3, 0, 17, 1}, uint8(1))
		f.Add(tc.wire[:len(tc.wire)-1], []byte{7}, uint8(2))
	}
	f.Add([]byte{}, []byte{}, uint8(0))
	f.Add([]byte{}, []byte{}, uint8(2))
	f.Add([]byte("MPA ID"), []byte{2}, uint8(0))
	f.Add([]byte("MPA IX"), []byte{2}, uint8(0))
	f.Add([]byte("MPA ID Req Frame\x00\x01"), []byte{0, 1}, uint8(3))
	f.Add([]byte("MPA ID Req Frame\x00\x03\x00\x00"), []byte{20}, uint8(0))                // Rev 3
	f.Add([]byte("MPA ID Rep Frame\x00\x01\x02\x01"), []byte{5}, uint8(0))                 // PD_Length 513
	f.Add([]byte("MPA ID Req Frame\xff\x01\xff\xff"), []byte{255}, uint8(1))               // PD_Length 65535
	f.Add([]byte("MPA ID Req Frame\x10\x02\x00\x03abc"), []byte{1, 2}, uint8(0))           // S with 3 octets
	f.Add([]byte("MPA ID Req Frame\x10\x01\x00\x03abc"), []byte{4}, uint8(1))              // S in Rev 1: reserved
	f.Add([]byte("MPA ID Rep Frame\x50\x02\x00\x04\x80\x10\x40\x08"), []byte{0}, uint8(0)) // enhanced data alone
	f.Fuzz(func(t *testing.T, b, chunks []byte, mode uint8) {
		want, n, werr := ParseFrame(b)
		end := io.EOF
		if mode&2 != 0 {
			end = errConnReset
		}
		readers := []*frameReader{
			{b: b, chunks: chunks, end: end, eofWithData: mode&1 != 0},
			{b: b, chunks: []byte{1}, end: end},
		}
		for i, r := range readers {
			r.frameLen = frameLenOf(b)
			got, err := ReadFrame(r)
			if r.overAsk > 0 {
				t.Fatalf("reader %d: asked for %d octets past the frame of %d", i, r.overAsk, r.frameLen)
			}
			switch {
			case werr == nil:
				if err != nil || !frameEqual(got, want) {
					t.Fatalf("reader %d: ReadFrame %+v %v, ParseFrame %+v", i, got, err, want)
				}
				if r.read != n {
					t.Fatalf("reader %d: ReadFrame took %d octets of a frame of %d", i, r.read, n)
				}
				if cap(got.PrivateData) != len(got.PrivateData) {
					t.Fatalf("reader %d: Private Data of %d octets holds %d", i, len(got.PrivateData), cap(got.PrivateData))
				}
			case errors.Is(werr, ErrShortFrame) && len(b) == 0 && end == io.EOF:
				if err != io.EOF {
					t.Fatalf("reader %d: empty stream gave %v", i, err)
				}
			case errors.Is(werr, ErrShortFrame):
				wantErr := end
				if end == io.EOF {
					wantErr = io.ErrUnexpectedEOF
				}
				if !errors.Is(err, term.MPAConnectionLost) || !errors.Is(err, wantErr) || errors.Is(err, term.MPAInvalidFrame) {
					t.Fatalf("reader %d: stream of %d octets ending inside the frame: %v", i, len(b), err)
				}
				if r.read != len(b) {
					t.Fatalf("reader %d: %d of %d octets read", i, r.read, len(b))
				}
			default:
				if !errors.Is(err, term.MPAInvalidFrame) || errors.Is(err, term.MPAConnectionLost) {
					t.Fatalf("reader %d: ReadFrame %v, ParseFrame %v", i, err, werr)
				}
			}
		}
	})
}

// TestReadFrameAllocs: reading a valid frame allocates the header's
// buffer and the Private Data, nothing else (no error is built on the
// way), and about the frame's length in octets.
func TestReadFrameAllocs(t *testing.T) {
	for _, tc := range frameGolden {
		r := bytes.NewReader(tc.wire)
		allocs := testing.AllocsPerRun(100, func() {
			r.Reset(tc.wire)
			if _, err := ReadFrame(r); err != nil {
				t.Fatal(err)
			}
		})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 100
		for range runs {
			r.Reset(tc.wire)
			_, _ = ReadFrame(r)
		}
		runtime.ReadMemStats(&after)
		perRun := (after.TotalAlloc - before.TotalAlloc) / runs
		wantAllocs := 1.0
		if len(tc.f.PrivateData) > 0 {
			wantAllocs = 2
		}
		if allocs > wantAllocs || perRun > uint64(FrameHeaderLen+len(tc.f.PrivateData)+32) {
			t.Errorf("%s: %v allocations, %d octets for a frame of %d", tc.name, allocs, perRun, len(tc.wire))
		}
	}
}
