//go:build linux

package batchconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKernelFeatures reports what the kernel gives, and checks that GSO
// and GRO, where present, carry a burst in fewer calls than datagrams.
func TestKernelFeatures(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			a, b := newConn(t, network, nil), newConn(t, network, nil)
			t.Logf("features: %+v", a.Features())
			var sent [][]byte
			a.Cork()
			for i := range 200 {
				n := 1200
				if i == 99 {
					n = 500 // ends a run
				}
				d := datagram(i, n)
				if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, d)
			}
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			readAll(t, b, udpAddr(a), sent)
			as, bs := a.Stats(), b.Stats()
			t.Logf("sender %+v", as)
			t.Logf("receiver %+v", bs)
			if as.SendDatagrams != 200 || bs.RecvDatagrams != 200 {
				t.Fatalf("counted %d sent, %d received; want 200", as.SendDatagrams, bs.RecvDatagrams)
			}
			// WriteBatch is 64: a Flush every 64 datagrams at least.
			if as.SendCalls > 4 {
				t.Errorf("%d send calls for 200 datagrams in bursts of 64", as.SendCalls)
			}
			if f := a.Features(); f.GSO && as.SendMessages > 8 {
				t.Errorf("GSO on, yet %d messages for 200 datagrams", as.SendMessages)
			}
			if f := b.Features(); f.GRO && a.Features().GSO && bs.RecvMessages >= 200 {
				t.Errorf("GRO on, yet %d messages received for 200 datagrams", bs.RecvMessages)
			}
		})
	}
}

// fakeSendmmsg replaces sendmmsg for the test's duration with f, which
// may call the real one.
func fakeSendmmsg(t *testing.T, f func(fd uintptr, msgs []mmsghdr) (int, syscall.Errno)) {
	real := sendmmsgCall
	sendmmsgCall = f
	t.Cleanup(func() { sendmmsgCall = real })
}

// isGSO reports whether m carries a UDP_SEGMENT control message.
func isGSO(m *mmsghdr) bool { return m.hdr.Controllen != 0 }

func burst(t *testing.T, a, b *Conn, n, size int) [][]byte {
	t.Helper()
	var sent [][]byte
	a.Cork()
	for i := range n {
		d := datagram(i, size)
		if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, d)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	return sent
}

// TestGSORefused checks that a GSO message refused with EIO is sent
// again without GSO, and GSO stays off.
func TestGSORefused(t *testing.T) {
	for _, errno := range []syscall.Errno{unix.EIO, unix.EINVAL} {
		t.Run(errno.Error(), func(t *testing.T) {
			a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
			if !a.Features().GSO {
				t.Skip("no GSO here")
			}
			refused := 0
			fakeSendmmsg(t, func(fd uintptr, msgs []mmsghdr) (int, syscall.Errno) {
				for i := range msgs {
					if isGSO(&msgs[i]) {
						if i == 0 {
							refused++
							return 0, errno
						}
						msgs = msgs[:i]
						break
					}
				}
				return sendmmsg(fd, msgs)
			})
			sent := burst(t, a, b, 40, 1000)
			readAll(t, b, udpAddr(a), sent)
			if refused != 1 || a.Features().GSO {
				t.Fatalf("refused %d times, GSO still %v", refused, a.Features().GSO)
			}
			sent = burst(t, a, b, 40, 1000)
			readAll(t, b, udpAddr(a), sent)
			if refused != 1 {
				t.Fatalf("GSO tried again after a refusal")
			}
		})
	}
}

// TestPartialSends checks that Flush goes on after sendmmsg sends only
// some messages, or reports EAGAIN.
func TestPartialSends(t *testing.T) {
	a, b := newConn(t, "udp4", &Config{DisableGSO: true}), newConn(t, "udp4", nil)
	calls := 0
	fakeSendmmsg(t, func(fd uintptr, msgs []mmsghdr) (int, syscall.Errno) {
		calls++
		switch calls % 3 {
		case 1:
			return sendmmsg(fd, msgs[:1])
		case 2:
			return 0, unix.EAGAIN
		}
		return sendmmsg(fd, msgs[:min(len(msgs), 2)])
	})
	sent := burst(t, a, b, 30, 500)
	readAll(t, b, udpAddr(a), sent)
	if calls < 20 {
		t.Fatalf("%d calls to send 30 datagrams one or two at a time", calls)
	}
}

// TestRefusedDatagram checks that a datagram the kernel refuses is
// dropped, the rest are sent, and Flush reports the error.
func TestRefusedDatagram(t *testing.T) {
	a, b := newConn(t, "udp4", &Config{DisableGSO: true}), newConn(t, "udp4", nil)
	calls := 0
	fakeSendmmsg(t, func(fd uintptr, msgs []mmsghdr) (int, syscall.Errno) {
		calls++
		if calls == 2 {
			return 0, unix.ENOBUFS
		}
		return sendmmsg(fd, msgs[:min(len(msgs), 3)])
	})
	a.Cork()
	var sent [][]byte
	for i := range 10 {
		d := datagram(i, 100)
		if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
			t.Fatal(err)
		}
		if i != 3 { // the first of the second call
			sent = append(sent, d)
		}
	}
	if err := a.Flush(); !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Flush: %v, want ENOBUFS", err)
	}
	readAll(t, b, udpAddr(a), sent)
}

// TestAllocs checks that ReadFrom and WriteTo allocate nothing in steady
// state, sending at once and between Cork and Flush, with and without
// GSO and GRO.
func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, c := range []struct {
		name      string
		cfg       *Config
		connected bool
	}{
		{"gso-gro", nil, false},
		{"nogso-nogro", &Config{DisableGSO: true, DisableGRO: true}, false},
		{"connected", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := newConn(t, "udp4", c.cfg), newConn(t, "udp4", c.cfg)
			var dst net.Addr = udpAddr(b)
			if c.connected {
				a, dst = dialConn(t, "udp4", udpAddr(b), c.cfg), nil
			}
			p, buf := datagram(1, 1200), make([]byte, 2000)
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := a.WriteTo(p, dst); err != nil {
					t.Fatal(err)
				}
				if _, _, err := b.ReadFrom(buf); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("WriteTo and ReadFrom: %v allocations a datagram", allocs)
			}
			allocs = testing.AllocsPerRun(100, func() {
				a.Cork()
				for range 32 {
					if _, err := a.WriteTo(p, dst); err != nil {
						t.Fatal(err)
					}
				}
				if err := a.Flush(); err != nil {
					t.Fatal(err)
				}
				for range 32 {
					if _, _, err := b.ReadFrom(buf); err != nil {
						t.Fatal(err)
					}
				}
			})
			if allocs != 0 {
				t.Errorf("a burst of 32 between Cork and Flush: %v allocations", allocs)
			}
			allocs = testing.AllocsPerRun(100, func() {
				if _, err := a.WriteTo(p, dst); err != nil {
					t.Fatal(err)
				}
				if _, _, err := b.Next(); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("WriteTo and Next: %v allocations a datagram", allocs)
			}
		})
	}
}

// TestConnectedRefused checks that a connected Conn hears the kernel's
// ICMP port unreachable as ECONNREFUSED on its next read, whether its
// datagram went at once or between Cork and Flush.
func TestConnectedRefused(t *testing.T) {
	for _, corked := range []bool{false, true} {
		gone := listenUDP(t, "udp4")
		to := udpAddr(gone)
		_ = gone.Close() // nothing listens there now
		a := dialConn(t, "udp4", to, nil)
		if corked {
			a.Cork()
		}
		if _, err := a.WriteTo([]byte("anyone?"), nil); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := a.ReadFrom(make([]byte, 100)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("corked %v: read %v, want ECONNREFUSED", corked, err)
		}
	}
}

// TestWriteDeadline checks that Flush past the write deadline fails as a
// plain write does and drops what is held.
func TestWriteDeadline(t *testing.T) {
	a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
	a.Cork()
	for i := range 5 {
		if _, err := a.WriteTo(datagram(i, 100), udpAddr(b)); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.SetWriteDeadline(time.Now().Add(-time.Second))
	if err := a.Flush(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Flush past the deadline: %v", err)
	}
	if _, err := a.WriteTo(datagram(9, 100), udpAddr(b)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteTo past the deadline: %v", err)
	}
	_ = a.SetWriteDeadline(time.Time{})
	d := datagram(10, 100)
	if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
		t.Fatal(err)
	}
	readAll(t, b, udpAddr(a), [][]byte{d})
}

func TestParseProcNet(t *testing.T) {
	snmp := "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 10 0 3 10 7 0\n"
	if n, err := parseRcvbufErrors(strings.NewReader(snmp)); err != nil || n != 7 {
		t.Fatalf("RcvbufErrors: %d, %v", n, err)
	}
	udp := "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		" 1180: 0100007F:D2B8 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 45678 2 0000000000000000 42\n"
	if n, ok := parseSocketDrops(strings.NewReader(udp), 0xd2b8); !ok || n != 42 {
		t.Fatalf("drops: %d, %v", n, ok)
	}
	if _, ok := parseSocketDrops(strings.NewReader(udp), 1); ok {
		t.Fatal("found a socket on port 1")
	}
}

// FuzzGROSegment checks that control data of any form yields a segment
// size without a panic, and that a well-formed UDP_GRO message yields
// its own.
func FuzzGROSegment(f *testing.F) {
	good := make([]byte, groCmsgSpace)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&good[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_GRO
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(good[unix.CmsgLen(0):], 1200)
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add([]byte{})
	f.Add(good[:unix.CmsgLen(0)])
	f.Fuzz(func(t *testing.T, b []byte) {
		// The kernel's buffer is aligned for struct cmsghdr.
		aligned := make([]uint64, (len(b)+7)/8)
		buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(aligned))), len(aligned)*8)[:len(b)]
		copy(buf, b)
		n := groSegment(buf)
		if bytes.Equal(b, good) && n != 1200 {
			t.Fatalf("segment %d, want 1200", n)
		}
	})
}

// TestFlushWaitsForRoom checks that a Flush the kernel keeps answering
// EAGAIN waits, and ends at the write deadline or Close.
func TestFlushWaitsForRoom(t *testing.T) {
	fakeSendmmsg(t, func(uintptr, []mmsghdr) (int, syscall.Errno) { return 0, unix.EAGAIN })
	for _, end := range []string{"deadline", "close"} {
		t.Run(end, func(t *testing.T) {
			a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
			a.Cork()
			if _, err := a.WriteTo(datagram(0, 100), udpAddr(b)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- a.Flush() }()
			select {
			case err := <-done:
				t.Fatalf("Flush returned with no room: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			want := os.ErrDeadlineExceeded
			if end == "deadline" {
				_ = a.SetWriteDeadline(time.Now())
			} else {
				_ = a.Close()
				want = net.ErrClosed
			}
			select {
			case err := <-done:
				if !errors.Is(err, want) {
					t.Fatalf("Flush: %v, want %v", err, want)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Flush still waiting")
			}
		})
	}
}

// TestCloseLetsBuffersGo checks that a closed Conn holds no buffer, and
// that reads and writes after Close fail as the socket's do.
func TestCloseLetsBuffersGo(t *testing.T) {
	a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
	a.Cork()
	if _, err := a.WriteTo(datagram(1, 1000), udpAddr(b)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Next(); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	_ = b.Close()
	if a.w.arena != nil || b.r.buf != nil {
		t.Fatal("a closed Conn keeps its buffers")
	}
	a.Cork()
	if _, err := a.WriteTo(datagram(2, 1000), udpAddr(b)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteTo after Close: %v", err)
	}
	_ = a.Flush()
	if _, _, err := b.ReadFrom(make([]byte, 2000)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadFrom after Close: %v", err)
	}
}
