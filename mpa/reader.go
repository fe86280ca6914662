package mpa

import (
	"encoding/binary"
	"errors"
	"io"
)

// DefaultBufferSize is the size of a Reader's internal buffer.
const DefaultBufferSize = 8 << 10

// minBufferSize is the smallest buffer NewReaderSize accepts; the Reader
// needs room for at least a Marker and the fields around it.
const minBufferSize = 64

// maxEmptyReads is how many (0, nil) results from the underlying reader in
// a row make the Reader give up with io.ErrNoProgress.
const maxEmptyReads = 100

// ErrState is returned (wrapped) when a Reader's methods are called out of
// order: Read, ReadFull, Discard or Finish outside an FPDU, or Next while
// one is open. It does not break the Reader.
var ErrState = errors.New("mpa: Reader method called out of order")

// Reader is the receiving half of MPA Full Operation (RFC 5044 §4, §6): it
// finds the FPDUs in the byte stream of an io.Reader (normally the
// *net.TCPConn the startup frames were read from) by their ULPDU_Length
// fields and hands out their ULPDUs.
//
// The ULPDU is read with Read or ReadFull straight into the caller's
// buffer (its final destination, registered memory), with the Markers
// taken out and the CRC32c computed as the octets arrive; no FPDU is ever
// buffered whole. Large reads bypass the internal buffer and go from the
// kernel to the caller's buffer directly. Per FPDU:
//
//	n, err := r.Next()       // ULPDU_Length
//	r.ReadFull(hdr[:14])     // the DDP header, to learn where the rest goes
//	r.ReadFull(dst[:n-14])   // the payload, into its final place
//	err = r.Finish()         // PAD, CRC check, Marker check
//
// "An MPA receiver MUST first verify the FPDU before passing the ULPDU to
// DDP." (RFC 5044 §6): the octets that Read puts into the caller's buffer
// are unverified until Finish returns nil. The caller may place them but
// must not act on them (deliver a message, complete a work request) before
// then; this is DDP's placement/delivery split (RFC 5041 §5.3-5.4).
//
// Errors are sticky: after a CRC error, a Marker mismatch, a malformed
// ULPDU_Length or an error of the underlying reader, every call returns
// the same error. "Once MPA delivers an error of any type, it MUST NOT
// pass or deliver any additional FPDUs on that half connection."
// (RFC 5044 §8)
//
// A Reader allocates its buffer once and nothing per FPDU; the most it
// ever reads ahead is the buffer. A peer that stops sending leaves the
// Reader blocked in the underlying Read: use the connection's deadlines.
// A Reader is not safe for concurrent use.
type Reader struct {
	r    io.Reader
	rv   *vecReader // readv(2) on r, when r is a TCP connection on Linux
	opts Options
	max  int // opts.maxULPDU()

	buf    []byte
	rd, wr int // buf[rd:wr] is read from r but not consumed
	// pos is the stream position of buf[rd], counted from SeqStart (the
	// Reader's first octet): Markers are due where pos%512 == 0.
	pos  uint64
	err  error // sticky: returned by every call once set
	rerr error // the underlying reader's error, not yet acted on

	// The current FPDU.
	open      bool
	ulpduLen  int
	rem       int    // ULPDU octets not consumed yet
	fpduStart uint64 // stream position of its ULPDU_Length field
	crc       uint32 // running CRC32c from its first octet
	mErr      error  // first Marker mismatch, reported if the CRC is valid
}

// NewReader returns a Reader of FPDUs from r with the given options and a
// buffer of DefaultBufferSize. The first octet it reads is the first
// octet of Full Operation (SeqStart, RFC 5044 §4.3): r must be positioned
// right after the startup frame (see ReadFrame).
func NewReader(r io.Reader, o Options) *Reader {
	return NewReaderSize(r, o, DefaultBufferSize)
}

// NewReaderSize is NewReader with a buffer of size octets (at least 64).
func NewReaderSize(r io.Reader, o Options, size int) *Reader {
	size = max(size, minBufferSize)
	return &Reader{r: r, rv: newVecReader(r), opts: o, max: o.maxULPDU(), buf: make([]byte, size)}
}

// Options returns the Reader's options.
func (r *Reader) Options() Options { return r.opts }

// Offset returns the number of octets consumed since SeqStart. Between
// FPDUs it is the stream position of the next FPDU (of its Marker, if one
// precedes it).
func (r *Reader) Offset() uint64 { return r.pos }

// Remaining returns the octets of the current ULPDU not read yet.
func (r *Reader) Remaining() int { return r.rem }

// Err returns the Reader's sticky error, if any.
func (r *Reader) Err() error { return r.err }

// Next starts the next FPDU and returns its ULPDU_Length. The previous
// FPDU must have been finished with Finish.
//
// At a clean end of the stream between FPDUs it returns io.EOF. An
// ULPDU_Length below MinULPDU or above Options.MaxULPDU gives an error
// wrapping term.MPAInvalidFrame (see the package documentation), because
// no FPDU boundary after it can be trusted.
func (r *Reader) Next() (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.open {
		return 0, usageError("Next before Finish: %w", ErrState)
	}
	if r.rd == r.wr {
		// Only here is the end of the stream a clean one.
		if err := r.fill(1); err != nil {
			if r.rerr == io.EOF {
				r.err = io.EOF
			}
			return 0, r.err
		}
	}
	r.crc = 0
	r.mErr = nil
	if r.opts.Markers && markerDue(r.pos) {
		// "An FPDUPTR value of 0x0000 is a special case -- it is used when
		// the Marker falls exactly between FPDUs" (RFC 5044 §4.3).
		if err := r.marker(r.pos + MarkerLen); err != nil {
			return 0, err
		}
	}
	r.fpduStart = r.pos
	if err := r.fill(LengthFieldLen); err != nil {
		return 0, err
	}
	lf := r.buf[r.rd : r.rd+LengthFieldLen]
	l := int(binary.BigEndian.Uint16(lf))
	if err := checkLength(l, &r.opts); err != nil {
		r.err = err
		return 0, err
	}
	r.take(LengthFieldLen)
	r.open = true
	r.ulpduLen = l
	r.rem = l
	return l, nil
}

// Whole reports, between FPDUs, whether the next FPDU is all in the
// Reader's buffer, so that Next, reading its ULPDU and Finish read
// nothing from the connection; room reports whether it could be (not
// with Markers, nor for an FPDU longer than the buffer, nor after an
// error). Until its ULPDU_Length field is buffered an FPDU is taken to
// fit.
func (r *Reader) Whole() (whole, room bool) {
	if r.err != nil || r.open || r.opts.Markers {
		return false, false
	}
	n := r.wr - r.rd
	if n < LengthFieldLen {
		return false, true
	}
	l := int(binary.BigEndian.Uint16(r.buf[r.rd:]))
	need := LengthFieldLen + l + PadLen(l) + CRCLen
	if need > len(r.buf) {
		return false, false
	}
	return n >= need, true
}

// ReadMore reads once from the connection into the buffer, after what it
// holds, waiting for at least one octet. It is for a caller that waits
// for a whole FPDU (Whole) before it starts one, so as never to block in
// the middle of one. Its error is returned, not kept: a Reader whose
// connection timed out reads on as before.
func (r *Reader) ReadMore() error {
	if r.err != nil {
		return r.err
	}
	if r.rd > 0 {
		r.wr = copy(r.buf, r.buf[r.rd:r.wr])
		r.rd = 0
	}
	if r.wr == len(r.buf) {
		return nil
	}
	n, err := r.r.Read(r.buf[r.wr:])
	r.wr += n
	return err
}

// Read reads up to len(p) octets of the current ULPDU into p. It returns
// io.EOF when the whole ULPDU has been read. The octets are not verified
// until Finish returns nil.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if !r.open {
		return 0, usageError("Read outside an FPDU: %w", ErrState)
	}
	if r.rem == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.body(p[:min(len(p), r.rem)])
	r.rem -= n
	return n, err
}

// ReadFull reads exactly len(p) octets of the current ULPDU into p. Asking
// for more than Remaining gives an ErrState error and reads nothing.
func (r *Reader) ReadFull(p []byte) error {
	if r.err != nil {
		return r.err
	}
	if !r.open || len(p) > r.rem {
		return usageError("ReadFull of %d octets with %d left in the ULPDU: %w", len(p), r.rem, ErrState)
	}
	for len(p) > 0 {
		n, err := r.body(p)
		r.rem -= n
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Discard skips n octets of the current ULPDU (they still count for the
// CRC). Asking for more than Remaining gives an ErrState error.
func (r *Reader) Discard(n int) error {
	if r.err != nil {
		return r.err
	}
	if !r.open || n < 0 || n > r.rem {
		return usageError("Discard of %d octets with %d left in the ULPDU: %w", n, r.rem, ErrState)
	}
	if err := r.skip(n); err != nil {
		return err
	}
	r.rem -= n
	return nil
}

// Finish ends the current FPDU: it discards what is left of the ULPDU,
// reads the PAD, any Marker before the CRC and the CRC field, and checks
// them. It returns nil when the FPDU is valid, which is when its ULPDU may
// be passed on (RFC 5044 §6). Otherwise, in this order:
//
//   - a CRC mismatch (with CRCs on) is an error wrapping term.MPACRCError:
//     "If not, the receiver MUST treat the FPDU as an invalid FPDU."
//     (RFC 5044 §4.4);
//   - a Marker whose FPDUPTR does not point at this FPDU's ULPDU_Length
//     field is an error wrapping term.MPAMarkerMismatch (RFC 5044 §8,
//     code 3, "In the event that the CRC is valid").
func (r *Reader) Finish() error {
	if r.err != nil {
		return r.err
	}
	if !r.open {
		return usageError("Finish outside an FPDU: %w", ErrState)
	}
	if r.rem > 0 {
		if err := r.skip(r.rem); err != nil {
			return err
		}
		r.rem = 0
	}
	if err := r.skip(PadLen(r.ulpduLen)); err != nil {
		return err
	}
	if r.opts.Markers && markerDue(r.pos) {
		// "If there is a Marker immediately following the PAD, the
		// Marker is included in the CRC calculation for this FPDU."
		// (RFC 5044 §4.4)
		if err := r.marker(r.fpduStart); err != nil {
			return err
		}
	}
	if err := r.fill(CRCLen); err != nil {
		return err
	}
	got, want := WireCRC(r.buf[r.rd:]), r.crc
	r.take(CRCLen)
	r.open = false
	// "When CRCs are not in use, the CRC field MUST be considered valid
	// for FPDU checking regardless of its contents." (RFC 5044 §7.1.1)
	if r.opts.CRC && got != want {
		r.err = crcMismatch(got, want)
		return r.err
	}
	if r.mErr != nil {
		r.err = r.mErr
		return r.err
	}
	return nil
}

// body consumes up to len(p) octets of FPDU body (ULPDU or PAD) into p,
// stopping at the next Marker position; a Marker due first is consumed
// and checked. It reads directly into p, bypassing the buffer, when the
// buffer is empty and the piece is large.
func (r *Reader) body(p []byte) (int, error) {
	if r.opts.Markers && markerDue(r.pos) {
		if err := r.marker(r.fpduStart); err != nil {
			return 0, err
		}
	}
	n := len(p)
	if r.opts.Markers {
		n = min(n, toNextMarker(r.pos))
	}
	if r.rd == r.wr && n >= len(r.buf)/4 {
		var m int
		var err error
		if r.rv != nil && !r.opts.Markers && n == r.rem {
			// The piece ends the ULPDU: read what follows it into the
			// buffer in the same system call.
			m, err = r.readTail(p[:n])
		} else {
			m, err = r.direct(p[:n])
		}
		if m > 0 {
			if r.opts.CRC {
				r.crc = crcUpdate(r.crc, p[:m])
			}
			r.pos += uint64(m)
		}
		return m, err
	}
	if r.rd == r.wr {
		if err := r.fill(1); err != nil {
			return 0, err
		}
	}
	n = min(n, r.wr-r.rd)
	copy(p, r.take(n))
	return n, nil
}

// skip consumes n octets of FPDU body through the buffer, handling
// Markers as body does.
func (r *Reader) skip(n int) error {
	for n > 0 {
		if r.opts.Markers && markerDue(r.pos) {
			if err := r.marker(r.fpduStart); err != nil {
				return err
			}
		}
		c := n
		if r.opts.Markers {
			c = min(c, toNextMarker(r.pos))
		}
		if r.rd == r.wr {
			if err := r.fill(1); err != nil {
				return err
			}
		}
		c = min(c, r.wr-r.rd)
		r.take(c)
		n -= c
	}
	return nil
}

// marker consumes the Marker at r.pos and checks that its FPDUPTR points
// at the ULPDU_Length field at stream position at. A mismatch is kept for
// Finish, which reports it only if the CRC is valid.
func (r *Reader) marker(at uint64) error {
	if err := r.fill(MarkerLen); err != nil {
		return err
	}
	want := int(r.pos - at)
	if at > r.pos {
		want = 0 // the Marker before the ULPDU_Length field
	}
	m, _, _ := ParseMarker(r.buf[r.rd:r.wr])
	if m.Offset() != want && r.mErr == nil {
		r.mErr = markerMismatch(m.Offset(), want)
	}
	r.take(MarkerLen)
	return nil
}

// take consumes n buffered octets into the CRC and returns them.
func (r *Reader) take(n int) []byte {
	b := r.buf[r.rd : r.rd+n]
	if r.opts.CRC {
		r.crc = crcUpdate(r.crc, b)
	}
	r.rd += n
	r.pos += uint64(n)
	return b
}

// fill reads until at least need (<= len(r.buf)) octets are buffered. A
// stream that ends first is MPA error code 1 (RFC 5044 §8).
func (r *Reader) fill(need int) error {
	if r.wr-r.rd >= need {
		return nil
	}
	if r.rd > 0 {
		r.wr = copy(r.buf, r.buf[r.rd:r.wr])
		r.rd = 0
	}
	for r.wr < need {
		n, err := r.read(r.buf[r.wr:])
		r.wr += n
		if err != nil && r.wr < need {
			return err
		}
	}
	return nil
}

// direct reads into p from the underlying reader (the buffer is empty).
func (r *Reader) direct(p []byte) (int, error) {
	return r.read(p)
}

// readTail reads into p, which ends the ULPDU, and the octets after it
// into the (empty) buffer, with one readv(2). It returns how many went
// into p.
func (r *Reader) readTail(p []byte) (int, error) {
	r.rd, r.wr = 0, 0
	n, err := r.readv(p, r.buf)
	if n > len(p) {
		r.wr = n - len(p)
		n = len(p)
	}
	return n, err
}

// read calls the underlying reader until it returns octets or an error.
// An error that comes with octets is kept for the next call, so that the
// octets are used first. Errors become sticky here.
func (r *Reader) read(p []byte) (int, error) {
	return r.readv(p, nil)
}

// readv is read into p and then tail: with readv(2) when tail is not
// nil, which needs r.rv.
func (r *Reader) readv(p, tail []byte) (int, error) {
	for empty := 0; empty < maxEmptyReads; empty++ {
		if r.rerr != nil {
			err := r.rerr
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			r.err = connLost(err)
			return 0, r.err
		}
		var n int
		var err error
		if tail != nil {
			n, err = r.rv.readv(p, tail)
		} else {
			n, err = r.r.Read(p)
		}
		if n < 0 || n > len(p)+len(tail) {
			r.rerr = errors.New("mpa: underlying reader returned an invalid count")
			continue
		}
		r.rerr = err
		if n > 0 {
			return n, nil
		}
	}
	r.rerr = io.ErrNoProgress
	r.err = connLost(io.ErrNoProgress)
	return 0, r.err
}
