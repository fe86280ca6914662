package mpa

import (
	"net"
	"syscall"
	"unsafe"
)

// maxNowIovecs bounds the gather list of one FPDU that WriteNow writes:
// ULPDU_Length, header, payload, PAD, CRC and a few Markers.
const maxNowIovecs = 16

// nowWriter makes one non-blocking writev(2) on a TCP socket: the write
// WriteNow tries.
type nowWriter struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool // writev, made once
	iov  [maxNowIovecs]syscall.Iovec
	bufs [][]byte
	n    int
	err  error
}

// newTryNow returns the function Writer.WriteNow tries its write with, or
// nil when nc is not a plain TCP connection.
func newTryNow(nc net.Conn) func([][]byte) (int, error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &nowWriter{rc: rc}
	w.fn = w.writev
	return w.try
}

// try writes what the socket takes of bufs now and returns the octets
// written: 0 when it takes none (or bufs is longer than the writer
// gathers).
func (w *nowWriter) try(bufs [][]byte) (int, error) {
	if len(bufs) > len(w.iov) {
		return 0, nil
	}
	w.bufs = bufs
	err := w.rc.Write(w.fn)
	w.bufs = nil
	if err != nil {
		return 0, err
	}
	return w.n, w.err
}

// writev runs on the socket (RawConn.Write) and returns true: one attempt,
// never a wait for room.
func (w *nowWriter) writev(fd uintptr) bool {
	k := 0
	for _, b := range w.bufs {
		if len(b) > 0 {
			w.iov[k].Base = &b[0]
			w.iov[k].SetLen(len(b))
			k++
		}
	}
	r, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(k))
	clear(w.iov[:k])
	w.n, w.err = int(r), nil
	switch e {
	case 0:
	case syscall.EAGAIN, syscall.EINTR:
		w.n = 0
	default:
		w.n, w.err = 0, e
	}
	return true
}
