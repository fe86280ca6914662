package perf

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"sync/atomic"
)

// The raw TCP baseline moves messages as the best plain Go TCP stream
// does: many messages per system call both ways, and, when the MPA
// connection uses CRCs, CRC32c (Castagnoli, as RFC 5044 §4.4) over every
// octet on both sides, each message followed by its CRC as an FPDU is.
//
// Sending: messages of at least gatherMin octets are gathered with their
// CRCs into one writev of about gatherBytes (net.Buffers), straight from
// the source buffer, as MPA gathers FPDUs from registered memory; smaller
// ones are copied, with their CRCs, into a staging buffer written whole.
// Receiving: each read takes as much as the buffer holds (up to 1 MiB),
// and the messages in it are checked where they lie; nothing is copied
// further. docs/performance.md has the measurements behind these choices.
const (
	// RawBufLen is the length of each of the raw movers' buffers: reads
	// take up to this much at once, a staged batch of small messages is
	// this long, and the source of a gathered message repeats this many
	// octets of the pattern.
	RawBufLen = 1 << 20
	// gatherMin is the smallest message sent from the source buffer
	// rather than copied.
	gatherMin = 16 << 10
	// gatherBytes is how much one gathered write carries at most (but at
	// least one message): 4 MiB, as the iWARP side's flushes
	// (rdmap's maxBatchBytes), gave the plain stream 12 % more than 1 MiB
	// (reads of 4 MiB gave it nothing; docs/performance.md).
	gatherBytes = 4 << 20
	// maxIOV bounds the slices of one gathered write (Linux's IOV_MAX is
	// 1024).
	maxIOV = 1000
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrRawCRC is a raw message whose CRC32c does not match its octets.
var ErrRawCRC = errors.New("perf: raw TCP message: CRC32c mismatch")

// msgReader reads a stream of messages of size octets, each followed by
// its CRC32c (little-endian, as MPA's field) when crc is set, in reads
// as large as buf, and checks every CRC.
type msgReader struct {
	r    io.Reader
	buf  []byte
	size int
	crc  bool
	left int    // octets of the current message still to come
	sum  uint32 // its CRC32c so far
	tail [4]byte
	nt   int // octets of the CRC field seen
	n    int // octets read in all
	// progress, if set, counts the reads (for an idle watchdog).
	progress *atomic.Uint64
}

func newMsgReader(r io.Reader, buf []byte, size int, crc bool) *msgReader {
	return &msgReader{r: r, buf: buf, size: size, crc: crc, left: size}
}

// readSome reads once and returns how many messages that completed.
func (m *msgReader) readSome() (int, error) {
	n, err := m.r.Read(m.buf)
	m.n += n
	if m.progress != nil {
		m.progress.Add(1)
	}
	done, cerr := m.consume(m.buf[:n])
	if cerr != nil {
		return done, cerr
	}
	if err != nil && done == 0 {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return done, nil
}

// read reads until count messages have completed.
func (m *msgReader) read(count int) error {
	for done := 0; done < count; {
		k, err := m.readSome()
		if err != nil {
			return err
		}
		done += k
	}
	return nil
}

// consume parses b, returning the messages completed in it.
func (m *msgReader) consume(b []byte) (int, error) {
	done := 0
	for len(b) > 0 {
		if m.left > 0 {
			k := min(m.left, len(b))
			if m.crc {
				m.sum = crc32.Update(m.sum, castagnoli, b[:k])
			}
			m.left -= k
			b = b[k:]
			if m.left == 0 && !m.crc {
				done++
				m.left = m.size
			}
			continue
		}
		k := copy(m.tail[m.nt:], b)
		m.nt += k
		b = b[k:]
		if m.nt == 4 {
			if binary.LittleEndian.Uint32(m.tail[:]) != m.sum {
				return done, ErrRawCRC
			}
			done++
			m.nt, m.sum, m.left = 0, 0, m.size
		}
	}
	return done, nil
}

// msgWriter writes messages of size octets of src's pattern, each
// followed by its CRC32c when crc is set: small ones copied into stage
// and written in batches, large ones gathered from src.
type msgWriter struct {
	w     io.Writer
	src   []byte // the pattern; a message longer repeats it
	stage []byte // copy mode: the batch being built
	size  int
	crc   bool
	batch int // octets a batch carries at most (but at least one message)
	// gather mode
	iov    [][]byte
	wb     net.Buffers // what WriteTo consumes: iov's slices
	crcs   []byte      // the batch's CRC fields, 4 octets each
	queued int         // octets in the batch
	n      int         // octets written in all
	// progress, if set, counts the writes (for an idle watchdog).
	progress *atomic.Uint64
}

// newMsgWriter returns a writer of size-octet messages. src holds the
// pattern (at least min(size, RawBufLen) octets); stage is a buffer of
// RawBufLen octets for small messages (nil is allowed when size is at
// least gatherMin).
func newMsgWriter(w io.Writer, src, stage []byte, size int, crc bool) *msgWriter {
	return newMsgWriterShape(w, src, stage, size, crc, size >= gatherMin, gatherBytes)
}

// newMsgWriterShape is newMsgWriter with the shape given: gathered or
// copied, and the octets of a batch (the benchmarks compare shapes).
func newMsgWriterShape(w io.Writer, src, stage []byte, size int, crc, gather bool, batch int) *msgWriter {
	m := &msgWriter{w: w, src: src, size: size, crc: crc, batch: batch}
	if !gather {
		m.stage = stage[:0]
	} else {
		m.crcs = make([]byte, 0, 4*maxIOV)
		m.iov = make([][]byte, 0, maxIOV+2)
	}
	return m
}

// trailer is the CRC field's length when crc is set.
func (m *msgWriter) trailer() int {
	if m.crc {
		return 4
	}
	return 0
}

// queue adds one message to the batch, writing the batch first when it
// is full.
func (m *msgWriter) queue() error {
	if m.stage != nil {
		if len(m.stage)+m.size+m.trailer() > min(m.batch, cap(m.stage)) && len(m.stage) > 0 {
			if err := m.flush(); err != nil {
				return err
			}
		}
		start := len(m.stage)
		for left := m.size; left > 0; {
			p := m.src[:min(left, len(m.src))]
			m.stage = append(m.stage, p...)
			left -= len(p)
		}
		if m.crc {
			m.stage = binary.LittleEndian.AppendUint32(m.stage, crc32.Checksum(m.stage[start:], castagnoli))
		}
		return nil
	}
	pieces := (m.size + len(m.src) - 1) / len(m.src)
	if len(m.iov) > 0 && (m.queued+m.size > m.batch || len(m.iov)+pieces+1 > maxIOV) {
		if err := m.flush(); err != nil {
			return err
		}
	}
	sum := uint32(0)
	for left := m.size; left > 0; {
		p := m.src[:min(left, len(m.src))]
		if m.crc {
			sum = crc32.Update(sum, castagnoli, p)
		}
		m.iov = append(m.iov, p)
		left -= len(p)
	}
	if m.crc {
		at := len(m.crcs)
		m.crcs = binary.LittleEndian.AppendUint32(m.crcs, sum)
		m.iov = append(m.iov, m.crcs[at:at+4])
	}
	m.queued += m.size + m.trailer()
	return nil
}

// flush writes the batch.
func (m *msgWriter) flush() error {
	if m.progress != nil {
		m.progress.Add(1)
	}
	var err error
	if m.stage != nil {
		if len(m.stage) > 0 {
			_, err = m.w.Write(m.stage)
			m.n += len(m.stage)
			m.stage = m.stage[:0]
		}
		return err
	}
	if len(m.iov) > 0 {
		m.wb = m.iov
		_, err = m.wb.WriteTo(m.w)
		m.n += m.queued
		clear(m.iov)
		m.iov, m.crcs, m.queued = m.iov[:0], m.crcs[:0], 0
	}
	return err
}

// write sends count messages.
func (m *msgWriter) write(count int) error {
	for range count {
		if err := m.queue(); err != nil {
			return err
		}
	}
	return m.flush()
}

// pattern returns n octets of the data pattern.
func pattern(n int) []byte {
	b := make([]byte, n)
	fillPattern(b)
	return b
}

// fillPattern fills b with the data pattern: byte(i % 251), so that the
// first octets (0, 1, 2, 3) never read as a control message.
func fillPattern(b []byte) {
	for i := range b {
		b[i] = byte(i % 251)
	}
}
