package mpa

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// vecReader reads from a TCP socket into two buffers with one readv(2):
// the rest of an ULPDU into its destination and, in the same call, the
// PAD, the CRC and whatever follows (the next FPDU's header) into the
// Reader's buffer. Without it, the octets after a directly read ULPDU
// cost a read of their own.
type vecReader struct {
	rc  syscall.RawConn
	iov [2][]byte
	n   int
	err error
	fn  func(fd uintptr) bool // v.do, bound once so a call allocates nothing
}

// newVecReader returns a vecReader for r if r is a TCP connection, else
// nil.
func newVecReader(r io.Reader) *vecReader {
	rc := rawTCP(r)
	if rc == nil {
		return nil
	}
	v := &vecReader{rc: rc}
	v.fn = v.do
	return v
}

// rawTCP returns the raw connection of x if x is a TCP connection, else
// nil: the Reader's readv(2) and the Writer's non-waiting writev(2) make
// their system calls on it.
func rawTCP(x any) syscall.RawConn {
	tc, ok := x.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

func (v *vecReader) do(fd uintptr) bool {
	for {
		n, err := unix.Readv(int(fd), v.iov[:])
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // the runtime's poller waits for data
		}
		v.n, v.err = n, err
		return true
	}
}

// readv reads into a and then b, returning the total read. It honours
// the connection's deadlines and Close, as Read does.
func (v *vecReader) readv(a, b []byte) (int, error) {
	v.iov[0], v.iov[1] = a, b
	v.n, v.err = 0, nil
	err := v.rc.Read(v.fn)
	v.iov[0], v.iov[1] = nil, nil
	switch {
	case err != nil:
		return 0, err
	case v.err != nil:
		return 0, os.NewSyscallError("readv", v.err)
	case v.n == 0:
		return 0, io.EOF
	}
	return v.n, nil
}
