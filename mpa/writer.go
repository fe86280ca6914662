package mpa

import (
	"encoding/binary"
	"io"
	"net"

	"github.com/iwarpgo/iwarp/ddp"
)

// maxMarkersPerFPDU bounds the Markers one FPDU can hold: its wire length
// is at most 2 + 65535 + 3 + 4 octets plus the Markers, one per 508 other
// octets, plus one before the ULPDU_Length field.
const maxMarkersPerFPDU = (LengthFieldLen+MaxULPDU+3+CRCLen)/(MarkerInterval-MarkerLen) + 2

// zeros backs the PAD slices. Nothing writes to it.
var zeros [3]byte

// Writer is the sending half of MPA Full Operation (RFC 5044 §4): it turns
// ULPDUs (DDP segments) into FPDUs on an io.Writer, normally the
// *net.TCPConn the startup frames were exchanged on.
//
// Each WriteFPDU is one gather write (net.Buffers, which is writev(2) on a
// TCP connection) of the ULPDU_Length field, the caller's header and
// payload slices, the PAD, the CRC and any Markers, without copying the
// payload: the Writer keeps a small scratch area for the fields it makes
// and a reused slice of slices, so a WriteFPDU allocates nothing once the
// slice of slices has grown to the largest gather list used.
//
// A Writer is not safe for concurrent use; DDP serialises a stream's sends.
// After a write error the stream's framing is lost and every later call
// returns the same error.
type Writer struct {
	w    io.Writer
	opts Options
	// pos is the stream position of the next octet, counted from SeqStart
	// (the Writer's first octet): Markers are due where pos%512 == 0.
	pos uint64
	err error

	// The octets the Writer makes for each FPDU queued and not yet
	// written: ULPDU_Length, a copy of the header and the CRC, one slot
	// per queued FPDU; and their Markers, when Markers are in use.
	slots   [maxQueued]fpduSlot
	markers []fpduMarkers
	queued  int // FPDUs in the gather list
	nm      int // Markers used in the current FPDU

	bufs [][]byte    // the gather list; its backing array is reused
	nb   net.Buffers // what WriteTo consumes; a field so it does not escape per call
	run  uint32      // running CRC of the current FPDU

	// rest is what WriteNow's write left of its FPDU, copied; it leaves
	// before anything else.
	rest []byte
}

// maxQueued bounds the FPDUs Queue holds before it writes them: the
// FPDUs the DDP sender hands over between two flushes (the segments of
// one message, or of several queued together, such as a run of RDMA
// Read Requests) leave in gather writes of up to this many. rdmap hands
// over up to 128 messages, 4 MiB, between flushes: a window of Read
// Requests leaves in one write, and 64 KiB messages (two FPDUs each)
// in writes of 4 MiB (docs/performance.md). The Writer holds this many
// slots of 70 octets, and with Markers this many FPDUs' Markers (524
// octets each).
const maxQueued = 128

// maxQueuedHeader is the longest header Queue copies; a longer one is
// written at once.
const maxQueuedHeader = 64

type fpduSlot struct {
	lf  [LengthFieldLen]byte
	crc [CRCLen]byte
	hdr [maxQueuedHeader]byte
}

// fpduMarkers holds the Markers of one queued FPDU.
type fpduMarkers [maxMarkersPerFPDU][MarkerLen]byte

// NewWriter returns a Writer that writes FPDUs to w with the given
// options. The first octet it writes is the first octet of Full Operation
// (SeqStart, RFC 5044 §4.3): create it right after the startup frames.
// A MaxULPDU below MinMULPDU is taken as MinMULPDU: "The range of MULPDU
// values MUST be between 128 octets and 64768 octets, inclusive" (RFC
// 5044 §3), and the Writer's MaxULPDU is the MULPDU it offers DDP.
func NewWriter(w io.Writer, o Options) *Writer {
	if o.MaxULPDU > 0 && o.MaxULPDU < MinMULPDU {
		o.MaxULPDU = MinMULPDU
	}
	return newWriter(w, o)
}

// newWriter is NewWriter with o.MaxULPDU as given: AppendFPDU's limit.
func newWriter(w io.Writer, o Options) *Writer {
	wr := &Writer{w: w, opts: o, bufs: make([][]byte, 0, 16)}
	if o.Markers {
		wr.markers = make([]fpduMarkers, maxQueued)
	}
	return wr
}

// Options returns the Writer's options.
func (w *Writer) Options() Options { return w.opts }

// Offset returns the number of octets written since SeqStart.
func (w *Writer) Offset() uint64 { return w.pos }

// MULPDU returns the Options' MaxULPDU limit, at most MaxMULPDU (RFC 5044
// §3: "The range of MULPDU values MUST be between 128 octets and 64768
// octets, inclusive"): the largest ULPDU DDP should hand over. Set
// Options.MaxULPDU to MULPDU(EMSS(conn), markers) so that DDP sizes its
// segments to fit TCP segments (RFC 5044 §4.5, §5.1). WriteFPDU accepts
// ULPDUs up to Options.MaxULPDU (MaxULPDU when unset).
func (w *Writer) MULPDU() int { return min(w.opts.maxULPDU(), MaxMULPDU) }

// accept lets Queue take ULPDUs of up to n octets, when n is more than
// Options.MaxULPDU (a Conn's MULPDU grows with the EMSS).
func (w *Writer) accept(n int) {
	if w.opts.MaxULPDU != 0 && n > w.opts.MaxULPDU {
		w.opts.MaxULPDU = n
	}
}

// WriteFPDU sends one FPDU whose ULPDU is hdr followed by the payload
// slices (RFC 5044 §4.1): ULPDU_Length, the ULPDU, PAD to a multiple of
// four octets, the CRC (CRC32c when Options.CRC, else zero) and, with
// Options.Markers, a Marker wherever one is due (RFC 5044 §4.3).
//
// It does not retain hdr or the payload slices after it returns, and does
// not modify them. An ULPDU longer than Options.MaxULPDU gives
// ErrULPDUTooLong and writes nothing.
func (w *Writer) WriteFPDU(hdr []byte, payload [][]byte) error {
	if err := w.Queue(hdr, payload); err != nil {
		return err
	}
	return w.Flush()
}

// Queue adds one FPDU to the gather list without writing it, so that the
// FPDUs of one DDP message leave in one gather write (Flush). It copies
// hdr, but keeps the payload slices until Flush: their memory must not
// change before then. It writes what is queued first when the list is
// full or hdr is long.
func (w *Writer) Queue(hdr []byte, payload [][]byte) error {
	if w.err != nil {
		return w.err
	}
	if w.queued == maxQueued || len(hdr) > maxQueuedHeader {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	l := len(hdr)
	for _, p := range payload {
		l += len(p)
	}
	if l > w.opts.maxULPDU() {
		return ErrULPDUTooLong
	}
	start, mark := w.pos, len(w.bufs)
	slot := &w.slots[w.queued]
	if len(hdr) <= maxQueuedHeader {
		hdr = slot.hdr[:copy(slot.hdr[:], hdr)]
	}
	w.nm = 0
	w.run = 0
	var fpduStart uint64
	if w.opts.Markers && markerDue(w.pos) {
		// A Marker due before the ULPDU_Length field falls between FPDUs
		// (or precedes the first one): FPDUPTR 0x0000, and "the Marker
		// MUST be included in the CRC calculation of the FPDU following
		// the Marker" (RFC 5044 §4.3).
		w.addMarker(0)
	}
	fpduStart = w.pos
	binary.BigEndian.PutUint16(slot.lf[:], uint16(l))
	ok := w.add(slot.lf[:], fpduStart)
	ok = ok && w.add(hdr, fpduStart)
	for _, p := range payload {
		ok = ok && w.add(p, fpduStart)
	}
	ok = ok && w.add(zeros[:PadLen(l)], fpduStart)
	if ok && w.opts.Markers && markerDue(w.pos) {
		// "If there is a Marker immediately following the PAD, the
		// Marker is included in the CRC calculation for this FPDU."
		// (RFC 5044 §4.4)
		ok = w.markerAt(fpduStart)
	}
	if !ok {
		// A Marker would be more than 65535 octets from the ULPDU_Length
		// field: possible only with a MaxULPDU close to 65535.
		clear(w.bufs[mark:])
		w.bufs = w.bufs[:mark]
		w.pos = start
		return ErrULPDUTooLong
	}
	var c uint32
	if w.opts.CRC {
		c = w.run
	}
	PutCRC(slot.crc[:], c)
	w.bufs = append(w.bufs, slot.crc[:])
	w.pos += CRCLen
	w.queued++
	return nil
}

// Flush writes every queued FPDU in one gather write.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.rest) > 0 {
		_, err := w.w.Write(w.rest)
		// The copy goes with it: a peer that once read slowly does not
		// make the connection hold an FPDU's worth for its life.
		w.rest = nil
		if err != nil {
			w.err = ddp.Lost(err)
			w.reset()
			return w.err
		}
	}
	if w.queued == 0 {
		return nil
	}
	w.nb = w.bufs
	_, err := w.nb.WriteTo(w.w)
	w.nb = nil
	w.reset()
	if err != nil {
		// The stream's framing is lost with the octets not written.
		w.err = ddp.Lost(err)
	}
	return w.err
}

// reset empties the gather list.
func (w *Writer) reset() {
	clear(w.bufs)
	w.bufs = w.bufs[:0]
	w.queued = 0
}

// WriteNow makes one FPDU, as Queue does, and hands its gather list to
// try, which writes what the connection takes at once (a non-blocking
// writev) and returns the octets written. It reports whether the FPDU was
// taken: false when nothing was written, and then the Writer is as it
// was; true when all was written, or part, the rest copied to leave at
// the next Flush before anything else (Pending). It keeps no reference to
// hdr or the payload, and needs an empty gather list (it returns false
// otherwise).
func (w *Writer) WriteNow(hdr []byte, payload [][]byte, try func([][]byte) (int, error)) (bool, error) {
	if w.err != nil {
		return false, w.err
	}
	if w.queued != 0 || len(w.rest) > 0 {
		return false, nil
	}
	start := w.pos
	if err := w.Queue(hdr, payload); err != nil {
		return false, err
	}
	n, err := try(w.bufs)
	if err != nil {
		w.reset()
		w.err = ddp.Lost(err)
		return false, w.err
	}
	if n == 0 {
		w.pos = start
		w.reset()
		return false, nil
	}
	for _, b := range w.bufs {
		k := min(n, len(b))
		n -= k
		w.rest = append(w.rest, b[k:]...)
	}
	w.reset()
	return true, nil
}

// Pending reports whether part of an FPDU that WriteNow took waits for
// Flush.
func (w *Writer) Pending() bool { return len(w.rest) > 0 }

// add appends p to the gather list, cut where Markers are due, and runs
// the CRC over it. It reports false if a Marker's FPDUPTR would overflow.
func (w *Writer) add(p []byte, fpduStart uint64) bool {
	for len(p) > 0 {
		if w.opts.Markers && markerDue(w.pos) {
			if !w.markerAt(fpduStart) {
				return false
			}
		}
		c := len(p)
		if w.opts.Markers {
			c = min(c, toNextMarker(w.pos))
		}
		w.bufs = append(w.bufs, p[:c])
		if w.opts.CRC {
			w.run = crcUpdate(w.run, p[:c])
		}
		w.pos += uint64(c)
		p = p[c:]
	}
	return true
}

// markerAt inserts a Marker inside the FPDU whose ULPDU_Length field is
// at fpduStart: "FPDUPTR MUST contain the number of octets in the TCP
// stream from the beginning of the ULPDU Length field to the first octet
// of the Marker" (RFC 5044 §4.3).
func (w *Writer) markerAt(fpduStart uint64) bool {
	d := w.pos - fpduStart
	if d > 0xffff || w.nm == maxMarkersPerFPDU {
		return false
	}
	w.addMarker(uint16(d))
	return true
}

func (w *Writer) addMarker(fpduptr uint16) {
	m := w.markers[w.queued][w.nm][:]
	w.nm++
	putMarker(m, fpduptr)
	w.bufs = append(w.bufs, m)
	if w.opts.CRC {
		// "All MPA Markers are included in the containing FPDU CRC
		// calculation (when both CRCs and Markers are in use)."
		// (RFC 5044 §4.3)
		w.run = crcUpdate(w.run, m)
	}
	w.pos += MarkerLen
}
