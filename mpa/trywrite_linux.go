package mpa

import (
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tryWriter makes one writev(2) on a TCP socket that does not wait for
// room in the send buffer: it writes what the socket takes at once and
// reports how much that was. The receive goroutine answers RDMA Read
// Requests with it (Writer.SetNoWait), since a receive goroutine that
// waits for its peer to read, while the peer's waits for it, stops both.
type tryWriter struct {
	rc  syscall.RawConn
	iov []unix.Iovec // reused: a try allocates nothing
	n   int
	err error
	fn  func(fd uintptr) bool // t.do, bound once
}

// newTryWriter returns a tryWriter for w if w is a TCP connection, else
// nil.
func newTryWriter(w io.Writer) *tryWriter {
	rc := rawTCP(w)
	if rc == nil {
		return nil
	}
	t := &tryWriter{rc: rc, iov: make([]unix.Iovec, 0, 16)}
	t.fn = t.do
	return t
}

func (t *tryWriter) do(fd uintptr) bool {
	for {
		r, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&t.iov[0])), uintptr(len(t.iov)))
		switch e {
		case 0:
			t.n = int(r)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			// The socket is full: nothing written, and the caller does
			// not wait.
		default:
			t.err = e
		}
		return true
	}
}

// try writes a prefix of bufs without waiting and returns its length.
func (t *tryWriter) try(bufs [][]byte) (int, error) {
	t.iov = t.iov[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if len(t.iov) == maxIOV {
			break // the rest waits for the next write
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		t.iov = append(t.iov, v)
	}
	if len(t.iov) == 0 {
		return 0, nil
	}
	t.n, t.err = 0, nil
	err := t.rc.Write(t.fn)
	clear(t.iov) // keep no reference to the caller's memory
	switch {
	case err != nil:
		return 0, err
	case t.err != nil:
		return 0, os.NewSyscallError("writev", t.err)
	}
	return t.n, nil
}

// maxIOV is Linux's IOV_MAX: the most slices one writev(2) takes.
const maxIOV = 1024
