// Package readmodel is a plain-Go model of an RDMA Read stream over TCP,
// to tell what this machine and Go allow a Read of that shape from what
// the library adds (docs/performance.md, "A plain-Go model of the Read
// stream").
//
// The model has the library's shape and none of its code: a requester
// whose poster goroutine writes 28-octet requests, a window's worth
// outstanding and half a window at a time, while its receive goroutine
// reads the answers in reads of up to 1 MiB, checks each answer's CRC32c
// and copies it into a 64 KiB region, and wakes the poster every half
// window (as a completion queue with moderation would); and a responder
// whose receive goroutine reads the requests and hands them to its send
// goroutine, which answers each with 64 KiB and its CRC32c gathered from
// one source buffer into writev calls of up to 1 MiB. With FPDUs set,
// each answer travels as the two FPDUs MPA makes of a 64 KiB Read
// Response (a MULPDU of 64768: 64754 and 782 octets of payload, each
// with a length field, a 14-octet header, PAD and CRC). Stream is the
// plain stream the ratios are taken against: the same answers sent back
// to back, no requests.
package readmodel

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"sync"
)

// Size is the payload of one answer.
const Size = 64 << 10

// RequestLen is the length of one request: an RDMA Read Request's.
const RequestLen = 28

// batch bounds one gather write.
const batch = 1 << 20

// The two FPDUs of a 64 KiB Read Response at a MULPDU of 64768.
const (
	fpdu1   = 64754
	fpdu2   = Size - fpdu1
	hdrLen  = 2 + 14 // ULPDU_Length and a tagged DDP header
	pad1    = -(hdrLen + fpdu1) & 3
	pad2    = -(hdrLen + fpdu2) & 3
	framed1 = hdrLen + fpdu1 + pad1 + 4
	framed2 = hdrLen + fpdu2 + pad2 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCRC is an answer whose CRC32c does not match.
var ErrCRC = errors.New("readmodel: CRC32c mismatch")

// Modes a client asks the server for.
const (
	modeStream = 's'
	modeRead   = 'r'
)

// answerLen is the octets one answer takes on the wire.
func answerLen(fpdus bool) int {
	if fpdus {
		return framed1 + framed2
	}
	return Size + 4
}

// writer gathers answers into writes of up to batch octets.
type writer struct {
	c     net.Conn
	fpdus bool
	src   []byte
	hdr   [hdrLen + 3]byte // a header and the PAD's zeros
	iov   net.Buffers
	wb    net.Buffers
	crcs  []byte
	q     int
}

func newWriter(c net.Conn, fpdus bool) *writer {
	src := make([]byte, Size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	return &writer{c: c, fpdus: fpdus, src: src}
}

func (w *writer) queue() error {
	if w.q+answerLen(w.fpdus) > batch {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if !w.fpdus {
		at := len(w.crcs)
		w.crcs = binary.LittleEndian.AppendUint32(w.crcs, crc32.Checksum(w.src, castagnoli))
		w.iov = append(w.iov, w.src, w.crcs[at:at+4])
		w.q += Size + 4
		return nil
	}
	w.fpdu(w.src[:fpdu1], pad1)
	w.fpdu(w.src[fpdu1:], pad2)
	w.q += framed1 + framed2
	return nil
}

// fpdu adds one FPDU of payload p: header, payload, PAD, CRC.
func (w *writer) fpdu(p []byte, pad int) {
	h, z := w.hdr[:hdrLen], w.hdr[hdrLen:hdrLen+pad]
	c := crc32.Update(crc32.Update(crc32.Update(0, castagnoli, h), castagnoli, p), castagnoli, z)
	at := len(w.crcs)
	w.crcs = binary.LittleEndian.AppendUint32(w.crcs, c)
	w.iov = append(w.iov, h, p, z, w.crcs[at:at+4])
}

func (w *writer) flush() error {
	if len(w.iov) == 0 {
		return nil
	}
	w.wb = w.iov
	_, err := w.wb.WriteTo(w.c)
	clear(w.iov)
	w.iov, w.crcs, w.q = w.iov[:0], w.crcs[:0], 0
	return err
}

// reader reads answers in reads of up to 1 MiB, checks each and copies
// its payload into region.
type reader struct {
	c      net.Conn
	fpdus  bool
	buf    []byte
	rd, wr int
	region []byte
}

func newReader(c net.Conn, fpdus bool) *reader {
	return &reader{c: c, fpdus: fpdus, buf: make([]byte, 1<<20), region: make([]byte, Size)}
}

// next returns once one more answer is checked and copied.
func (r *reader) next() error {
	n := answerLen(r.fpdus)
	for r.wr-r.rd < n {
		if r.rd+n > len(r.buf) {
			r.wr = copy(r.buf, r.buf[r.rd:r.wr])
			r.rd = 0
		}
		k, err := r.c.Read(r.buf[r.wr:])
		if err != nil {
			return err
		}
		r.wr += k
	}
	m := r.buf[r.rd : r.rd+n]
	r.rd += n
	if !r.fpdus {
		if crc32.Checksum(m[:Size], castagnoli) != binary.LittleEndian.Uint32(m[Size:]) {
			return ErrCRC
		}
		copy(r.region, m[:Size])
		return nil
	}
	for _, f := range []struct{ at, p, pad int }{{0, fpdu1, pad1}, {framed1, fpdu2, pad2}} {
		b := m[f.at : f.at+hdrLen+f.p+f.pad+4]
		if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
			return ErrCRC
		}
		copy(r.region[f.at/framed1*fpdu1:], b[hdrLen:hdrLen+f.p])
	}
	return nil
}

// Serve answers the connections ln accepts until it fails. It is a
// measuring tool for loopback: it sets no limits on connections, counts
// or time, and is not part of any command a user runs against peers.
func Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serve(c)
	}
}

// A client's hello: the mode, FPDUs or not, and the count of answers.
const helloLen = 10

func serve(c net.Conn) error {
	defer c.Close()
	var h [helloLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return err
	}
	if h[0] != modeStream && h[0] != modeRead {
		return errors.New("readmodel: unknown mode")
	}
	fpdus, count := h[1] == 1, int(binary.BigEndian.Uint64(h[2:]))
	w := newWriter(c, fpdus)
	if h[0] == modeStream {
		for range count {
			if err := w.queue(); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
		_, err := io.ReadFull(c, h[:1])
		return err
	}
	// The responder: a receive goroutine hands requests to this one.
	var mu sync.Mutex
	wake := sync.NewCond(&mu)
	pending, ended := 0, false
	go func() {
		buf := make([]byte, 64<<10)
		have := 0
		for {
			k, err := c.Read(buf[have:])
			have += k
			n := have / RequestLen
			have = copy(buf, buf[n*RequestLen:have])
			mu.Lock()
			pending += n
			ended = err != nil
			mu.Unlock()
			wake.Signal()
			if err != nil {
				return
			}
		}
	}()
	for served := 0; served < count; {
		mu.Lock()
		for pending == 0 && !ended {
			wake.Wait()
		}
		n := pending
		pending = 0
		mu.Unlock()
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		for range n {
			if err := w.queue(); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
		served += n
	}
	return nil
}

func dial(addr string, mode byte, fpdus bool, count int) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	var h [helloLen]byte
	h[0] = mode
	if fpdus {
		h[1] = 1
	}
	binary.BigEndian.PutUint64(h[2:], uint64(count))
	if _, err := c.Write(h[:]); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Stream receives count answers sent back to back by the server at addr,
// each checked and copied, on a connection of its own.
func Stream(addr string, fpdus bool, count int) error {
	c, err := dial(addr, modeStream, fpdus, count)
	if err != nil {
		return err
	}
	defer c.Close()
	r := newReader(c, fpdus)
	for range count {
		if err := r.next(); err != nil {
			return err
		}
	}
	_, err = c.Write([]byte{1})
	return err
}

// Read makes count requests of the server at addr, up to window
// outstanding, and receives their answers, on a connection of its own.
func Read(addr string, fpdus bool, count, window int) error {
	c, err := dial(addr, modeRead, fpdus, count)
	if err != nil {
		return err
	}
	defer c.Close()
	half := max(1, window/2)
	r := newReader(c, fpdus)
	var mu sync.Mutex
	wake := sync.NewCond(&mu)
	done := 0
	var rerr error
	go func() {
		for i := range count {
			err := r.next()
			if err != nil || (i+1)%half == 0 || i+1 == count {
				mu.Lock()
				if err == nil {
					done = i + 1
				}
				rerr = err
				mu.Unlock()
				wake.Signal()
			}
			if err != nil {
				return
			}
		}
	}()
	reqs := make([]byte, RequestLen*window)
	for sent := 0; ; {
		mu.Lock()
		for rerr == nil && done < count && (sent == count || sent-done > half) {
			wake.Wait()
		}
		d, err := done, rerr
		mu.Unlock()
		if err != nil {
			return err
		}
		if d >= count {
			return nil
		}
		k := min(window-(sent-d), count-sent)
		if _, err := c.Write(reqs[:k*RequestLen]); err != nil {
			return err
		}
		sent += k
	}
}
