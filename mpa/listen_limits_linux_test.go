package mpa

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// The listening socket's Accept failing for want of a file descriptor
// (EMFILE) does not stop the Listener: once descriptors are free again, a
// genuine initiator is served. Not parallel: the limit is the process's.
func TestListenerSurvivesFDExhaustion(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)
	l, err := Listen(context.Background(), "tcp", "127.0.0.1:0", &Config{HandshakeTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A socket opened before the limit falls and connected after it: the
	// Listener's accept of it needs a descriptor, and none is below the
	// limit.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
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
	if d, err := syscall.Dup(fd); err != syscall.EMFILE {
		if err == nil {
			syscall.Close(d)
		}
		restore()
		t.Fatalf("a descriptor under the lowered limit: %v", err)
	}
	la := l.Addr().(*net.TCPAddr)
	sa := &syscall.SockaddrInet4{Port: la.Port}
	copy(sa.Addr[:], la.IP.To4())
	err = syscall.Connect(fd, sa)
	if err == nil {
		// The Listener wakes and its accept fails (EMFILE).
		time.Sleep(200 * time.Millisecond)
	}
	restore()
	if err != nil {
		t.Fatal(err)
	}
	a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(tctx(t), "tcp", l.Addr().String(), a.QP, &Config{HandshakeTimeout: 3 * time.Second})
		if err == nil {
			defer c.Close()
		}
		dialed <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	r, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept after the descriptors came back: %v", err)
	}
	c, err := r.Accept(b.QP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
}
