package mpa

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
)

// Reader buffer sizes: a Reader starts with minBuffer octets, which hold
// many small FPDUs per read, and grows to twice the longest FPDU it has to
// hold whole (at most one of 65535 octets of ULPDU and its Markers: about
// 130 KiB). While the peer streams (a read fills all the room there is)
// it doubles, up to streamBuffer, so that a bulk transfer takes many
// FPDUs per read system call, as a plain TCP reader of large buffers
// does (docs/performance.md).
const (
	minBuffer    = 32 << 10
	maxBuffer    = 2 * (LengthFieldLen + MaxULPDU + 3 + CRCLen + maxMarkersPerFPDU*MarkerLen)
	streamBuffer = 1 << 20
)

// maxEmptyReads is how many (0, nil) results from the underlying reader in
// a row make the Reader give up with io.ErrNoProgress.
const maxEmptyReads = 100

// Reader is the receiving half of MPA Full Operation (RFC 5044 §4, §6): it
// finds the FPDUs in the byte stream of an io.Reader (normally the
// *net.TCPConn the startup frames were read from) by their ULPDU_Length
// fields, and hands out each ULPDU only once its FPDU is verified: "An MPA
// receiver MUST first verify the FPDU before passing the ULPDU to DDP."
// (RFC 5044 §6). It reads the whole FPDU into its buffer, checks the CRC
// and the Markers, and returns the ULPDU (Markers taken out) as a slice of
// that buffer, so that DDP copies it to its final place once, after the
// check.
//
// Errors are sticky: after a CRC error, a Marker mismatch, a malformed
// ULPDU_Length or an error of the underlying reader, every call returns
// the same error. "Once MPA delivers an error of any type, it MUST NOT
// pass or deliver any additional FPDUs on that half connection." (RFC
// 5044 §8)
//
// A Reader allocates its buffer once and grows it a few times (for long
// FPDUs, and up to 1 MiB while the peer streams), and allocates nothing
// per FPDU. It is not safe for concurrent use.
type Reader struct {
	r    io.Reader
	opts Options

	buf    []byte
	rd, wr int // buf[rd:wr] is read from r but not consumed
	// pos is the stream position of buf[rd], counted from SeqStart (the
	// Reader's first octet): Markers are due where pos%512 == 0.
	pos     uint64
	scratch []byte // the ULPDU of an FPDU with Markers, Markers taken out
	err     error  // sticky: returned by every call once set
	// streaming says the last read filled all the room there was: the
	// buffer grows at the next fill, up to streamBuffer.
	streaming bool

	// partial bounds how long an FPDU may stay incomplete once its first
	// octet has arrived (SetPartialTimeout); dl sets the read deadline.
	// since is when the Reader first found the FPDU at stream position
	// sincePos incomplete. armed says a read deadline is set: it is set
	// for the FPDU in progress and left set after it, so that a stream of
	// FPDUs costs no deadline change per read; a deadline that passes
	// for an FPDU that has since completed is set again (watch).
	partial  time.Duration
	dl       interface{ SetReadDeadline(time.Time) error }
	armed    bool
	since    time.Time // zero before the first incomplete FPDU
	sincePos uint64
	// interrupted, if set, tells a read error that a caller interrupted
	// on purpose (a read deadline in the past) from a failure: Next then
	// returns errInterrupted, not sticky, and keeps what it had read.
	interrupted func() bool
}

// NewReader returns a Reader of FPDUs from r with the given options. The
// first octet it reads is the first octet of Full Operation (SeqStart,
// RFC 5044 §4.3): r must be positioned right after the startup frame (see
// ReadFrame).
func NewReader(r io.Reader, o Options) *Reader {
	rd := &Reader{r: r, opts: o, buf: make([]byte, minBuffer)}
	rd.dl, _ = r.(interface{ SetReadDeadline(time.Time) error })
	return rd
}

// SetPartialTimeout bounds how long an FPDU may take to arrive whole once
// its first octet is in, when the underlying reader has read deadlines (a
// net.Conn): a peer that announces a long ULPDU and stops sending is cut
// off then (the error wraps ddp.ErrLLPLost and os.ErrDeadlineExceeded).
// Waiting between FPDUs is never bounded. 0 (the default) turns it off.
func (r *Reader) SetPartialTimeout(d time.Duration) { r.partial = d }

// Options returns the Reader's options.
func (r *Reader) Options() Options { return r.opts }

// Offset returns the number of octets consumed since SeqStart: the stream
// position of the next FPDU (of its Marker, if one precedes it).
func (r *Reader) Offset() uint64 { return r.pos }

// Buffered returns the octets of the stream read and not yet consumed
// by Next.
func (r *Reader) Buffered() int { return r.wr - r.rd }

// Err returns the Reader's sticky error, if any.
func (r *Reader) Err() error { return r.err }

// Next reads the next FPDU and returns its ULPDU, verified: the CRC
// (when CRCs are in use) and every Marker (when Markers are) are good. The
// ULPDU is valid until the next call.
//
// At a clean end of the stream between FPDUs it returns io.EOF. A stream
// that ends or fails inside an FPDU gives an error wrapping
// ddp.ErrLLPLost. An ULPDU_Length below MinULPDU or above the Options'
// MaxULPDU gives an error wrapping term.MPAInvalidFrame (see the package
// documentation), because no FPDU boundary after it can be trusted; a CRC
// mismatch wraps term.MPACRCError ("If not, the receiver MUST treat the
// FPDU as an invalid FPDU.", RFC 5044 §4.4); a Marker whose FPDUPTR does
// not point at the FPDU's ULPDU_Length field wraps term.MPAMarkerMismatch
// (RFC 5044 §8 code 3, "In the event that the CRC is valid").
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	// The ULPDU_Length field first (after a Marker, if one is due): a
	// bad one is reported before anything else.
	need := LengthFieldLen
	if r.opts.Markers && markerDue(r.pos) {
		need += MarkerLen
	}
	if err := r.fill(need); err != nil {
		return nil, err
	}
	n, _ := FPDULen(r.buf[r.rd:r.wr], r.pos, r.opts)
	l := ulpduLength(r.buf[r.rd:r.wr], r.pos, r.opts)
	if err := checkLength(l, &r.opts); err != nil {
		r.err = err
		return nil, err
	}
	if err := r.fill(n); err != nil {
		return nil, err
	}
	fpdu := r.buf[r.rd : r.rd+n]
	var ulpdu []byte
	if r.opts.Markers {
		u, _, err := ParseFPDU(r.scratch[:0], fpdu, r.pos, r.opts)
		if err != nil {
			r.err = err
			return nil, err
		}
		r.scratch, ulpdu = u, u
	} else {
		// "When CRCs are not in use, the CRC field MUST be considered
		// valid for FPDU checking regardless of its contents." (RFC 5044
		// §7.1.1)
		if r.opts.CRC {
			if got, want := WireCRC(fpdu[n-CRCLen:]), CRC(fpdu[:n-CRCLen]); got != want {
				r.err = crcMismatch(got, want)
				return nil, r.err
			}
		}
		ulpdu = fpdu[LengthFieldLen : LengthFieldLen+l]
	}
	r.rd += n
	r.pos += uint64(n)
	return ulpdu, nil
}

// watch makes sure a read deadline bounds the FPDU in progress, the one at
// r.pos, of which some octets are buffered: at most partial after the
// Reader first found it incomplete. A deadline set for an earlier FPDU
// stays: it passes sooner, and the read it interrupts then sets this
// one's (fill). So a stream of FPDUs sets a deadline once per partial
// timeout, not at each read: setting one costs a timer and may wake the
// network poller's thread, as much as the read itself.
func (r *Reader) watch() {
	if r.since.IsZero() || r.sincePos != r.pos {
		r.since, r.sincePos = time.Now(), r.pos
	}
	if !r.armed {
		r.armed = true
		r.dl.SetReadDeadline(r.since.Add(r.partial))
	}
}

// overdue reports whether the FPDU in progress has been incomplete for the
// partial timeout.
func (r *Reader) overdue() bool {
	return r.wr > r.rd && !r.since.IsZero() && r.sincePos == r.pos && time.Since(r.since) >= r.partial
}

// fill reads until at least need octets are buffered, growing the buffer
// if it cannot hold them. An end of the stream with nothing buffered is a
// clean io.EOF; anything else that stops it is the LLP stream's loss.
func (r *Reader) fill(need int) error {
	if r.wr-r.rd >= need {
		return nil
	}
	if need > len(r.buf) || (r.streaming && len(r.buf) < streamBuffer) {
		size := min(max(2*need, len(r.buf)), maxBuffer)
		if r.streaming {
			size = min(2*len(r.buf), streamBuffer)
			r.streaming = false
		}
		b := make([]byte, max(size, need))
		r.wr = copy(b, r.buf[r.rd:r.wr])
		r.rd, r.buf = 0, b
	} else if r.rd+need > len(r.buf) {
		r.wr = copy(r.buf, r.buf[r.rd:r.wr])
		r.rd = 0
	}
	empty := 0
	for r.wr-r.rd < need {
		if r.wr > r.rd && r.partial > 0 && r.dl != nil {
			r.watch()
		}
		room := len(r.buf) - r.wr
		n, err := r.r.Read(r.buf[r.wr:])
		if n < 0 || n > room {
			err, n = errors.New("mpa: underlying reader returned an invalid count"), 0
		}
		// A read that takes all the room there is says more is waiting.
		r.streaming = n == room && room >= minBuffer/2
		r.wr += n
		if r.wr-r.rd >= need {
			return nil
		}
		switch {
		case err != nil && r.interrupted != nil && r.interrupted():
			r.armed = false
			return errInterrupted
		case err == io.EOF && r.wr == r.rd:
			r.err = io.EOF
		case err == io.EOF:
			r.err = ddp.Lost(fmt.Errorf("mpa: the stream ended inside an FPDU: %w", io.ErrUnexpectedEOF))
		case r.armed && errors.Is(err, os.ErrDeadlineExceeded) && r.overdue():
			r.err = ddp.Lost(fmt.Errorf("mpa: an FPDU stayed incomplete for %v: %w", r.partial, err))
		case r.armed && errors.Is(err, os.ErrDeadlineExceeded):
			// Set for an FPDU that has completed since: set it for this
			// one (watch), or clear it between FPDUs.
			r.armed = false
			r.dl.SetReadDeadline(time.Time{})
			continue
		case err != nil:
			r.err = ddp.Lost(err)
		case n == 0:
			if empty++; empty == maxEmptyReads {
				r.err = ddp.Lost(io.ErrNoProgress)
			}
		default:
			empty = 0
		}
		if r.err != nil {
			return r.err
		}
	}
	return nil
}
