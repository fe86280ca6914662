// Package fdlimit makes a listener's accept(2) fail for want of a file
// descriptor (EMFILE), for tests of listeners that must survive it, as
// net/http's Server does, instead of stopping for good.
//
//	fdlimit.FailAccept(t, ln.Addr().(*net.TCPAddr), 200*time.Millisecond)
//	// the listener has seen EMFILE; descriptors are free again: dial it.
//
// The limit is the process's: tests that use it must not run in
// parallel with others that open files.
package fdlimit

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// FailAccept lowers RLIMIT_NOFILE to the lowest free descriptor, connects
// a socket opened before to addr, so that the listener there wakes and
// its accept fails (EMFILE), waits for wait, and puts the limit back. The
// connected socket stays open until the test ends: it waits in the
// listener's queue, and is accepted once the listener tries again. It
// skips the test where the limit cannot be changed.
func FailAccept(t testing.TB, addr *net.TCPAddr, wait time.Duration) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Error(err)
		}
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	free, err := syscall.Dup(fd) // the lowest free descriptor
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(free)
	low := orig
	low.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer restore()
	if d, err := syscall.Dup(fd); err != syscall.EMFILE {
		if err == nil {
			syscall.Close(d)
		}
		t.Fatalf("a descriptor is free under the lowered limit: %v", err)
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		t.Fatalf("connecting under the lowered limit: %v", err)
	}
	time.Sleep(wait) // the listener wakes, and its accept fails
}
