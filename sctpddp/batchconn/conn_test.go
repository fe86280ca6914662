//go:build !js

package batchconn

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// socketBuffer is the SO_RCVBUF and SO_SNDBUF of test sockets: large
// enough that a burst is not lost on loopback.
const socketBuffer = 4 << 20

// listenUDP opens a UDP socket on the loopback address of network
// ("udp4" or "udp6") with large buffers, or skips the test if there is
// none.
func listenUDP(t testing.TB, network string) *net.UDPConn {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 1)
	if network == "udp6" {
		ip = net.IPv6loopback
	}
	uc, err := net.ListenUDP(network, &net.UDPAddr{IP: ip})
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	_ = uc.SetReadBuffer(socketBuffer)
	_ = uc.SetWriteBuffer(socketBuffer)
	return uc
}

// newConn makes a Conn on a fresh loopback socket, closed at the test's
// end.
func newConn(t testing.TB, network string, cfg *Config) *Conn {
	t.Helper()
	c, err := New(listenUDP(t, network), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// udpAddr is c's local address.
func udpAddr(c net.PacketConn) *net.UDPAddr { return c.LocalAddr().(*net.UDPAddr) }

// datagram returns datagram i of length n: its index, then a pattern
// that depends on it, so that any misplaced octet shows.
func datagram(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*7 + k*13 + k>>8)
	}
	if n >= 4 {
		b[0], b[1], b[2], b[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	}
	return b
}

// configs are the Conn settings every behaviour is checked under.
var configs = []struct {
	name string
	cfg  *Config
}{
	{"default", nil},
	{"nogso-nogro", &Config{DisableGSO: true, DisableGRO: true}},
	{"small-batches", &Config{ReadBatch: 3, WriteBatch: 5}},
}

func forEachConfig(t *testing.T, f func(t *testing.T, network string, cfg *Config)) {
	for _, network := range []string{"udp4", "udp6"} {
		for _, c := range configs {
			t.Run(network+"/"+c.name, func(t *testing.T) { f(t, network, c.cfg) })
		}
	}
}

// readAll reads want datagrams from c and checks them against sent, in
// order, and their source against from.
func readAll(t *testing.T, c *Conn, from *net.UDPAddr, sent [][]byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 70000)
	for i, want := range sent {
		n, addr, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i, len(sent), err)
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: got %d octets, want %d (or different content)", i, n, len(want))
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok || ua.Port != from.Port || !ua.IP.Equal(from.IP) {
			t.Fatalf("datagram %d from %v, want %v", i, addr, from)
		}
	}
}

func TestWriteToSendsAtOnce(t *testing.T) {
	forEachConfig(t, func(t *testing.T, network string, cfg *Config) {
		a, b := newConn(t, network, cfg), newConn(t, network, cfg)
		var sent [][]byte
		for i := range 100 {
			d := datagram(i, 1+i*37%3000)
			if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, d)
		}
		readAll(t, b, udpAddr(a), sent)
	})
}

func TestCorkFlush(t *testing.T) {
	forEachConfig(t, func(t *testing.T, network string, cfg *Config) {
		// The sender holds datagrams of up to 4096 octets and sends
		// longer ones at once; the receivers take them whole.
		small := Config{}
		if cfg != nil {
			small = *cfg
		}
		small.MaxDatagram = 4096
		a, b, c := newConn(t, network, &small), newConn(t, network, cfg), newConn(t, network, cfg)
		var toB, toC [][]byte
		for burst := range 5 {
			a.Cork()
			for i := range 150 {
				// Runs of equal sizes, shorter ends, empty datagrams
				// and a second destination in between.
				n := 1200
				switch {
				case i%50 == 49:
					n = 0
				case i%17 == 16:
					n = 700
				case i%31 == 30:
					n = 5000 // beyond MaxDatagram: sent at once
				}
				d := datagram(burst*1000+i, n)
				dst, list := b, &toB
				if i%40 == 39 {
					dst, list = c, &toC
				}
				if _, err := a.WriteTo(d, udpAddr(dst)); err != nil {
					t.Fatal(err)
				}
				*list = append(*list, d)
			}
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		readAll(t, b, udpAddr(a), toB)
		readAll(t, c, udpAddr(a), toC)
	})
}

func TestCorkNests(t *testing.T) {
	a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
	a.Cork()
	a.Cork()
	d0, d1 := datagram(0, 100), datagram(1, 100)
	if _, err := a.WriteTo(d0, udpAddr(b)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil { // sends d0; still corked
		t.Fatal(err)
	}
	readAll(t, b, udpAddr(a), [][]byte{d0})
	if _, err := a.WriteTo(d1, udpAddr(b)); err != nil {
		t.Fatal(err)
	}
	if a.Features().Batch {
		buf := make([]byte, 200)
		_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, _, err := b.ReadFrom(buf); err == nil {
			t.Fatalf("received %d octets held by the outer Cork", n)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	readAll(t, b, udpAddr(a), [][]byte{d1})
	if err := a.Flush(); err != nil { // unmatched: harmless
		t.Fatal(err)
	}
	d2 := datagram(2, 10)
	if _, err := a.WriteTo(d2, udpAddr(b)); err != nil {
		t.Fatal(err)
	}
	readAll(t, b, udpAddr(a), [][]byte{d2})
}

// TestTruncation checks that a datagram longer than the caller's buffer
// is cut to it, the rest discarded, as a plain ReadFrom does, and that
// one longer than the receive slot is cut to the slot.
func TestTruncation(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows fails a read into a short buffer (WSAEMSGSIZE) rather than truncating")
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			a, b := newConn(t, "udp4", c.cfg), newConn(t, "udp4", c.cfg)
			long, next := datagram(0, 3000), datagram(1, 50)
			for _, d := range [][]byte{long, next} {
				if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 100)
			_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := b.ReadFrom(buf)
			if err != nil || n != 100 || !bytes.Equal(buf[:n], long[:100]) {
				t.Fatalf("truncated read: %d octets, %v", n, err)
			}
			n, _, err = b.ReadFrom(buf)
			if err != nil || !bytes.Equal(buf[:n], next) {
				t.Fatalf("read after a truncated one: %d octets, %v", n, err)
			}
		})
	}
	t.Run("slot", func(t *testing.T) {
		cfg := &Config{MaxDatagram: 1000, DisableGRO: true}
		a, b := newConn(t, "udp4", cfg), newConn(t, "udp4", cfg)
		long := datagram(0, 3000)
		if _, err := a.WriteTo(long, udpAddr(b)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4000)
		_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := b.ReadFrom(buf)
		want := 3000
		if b.Features().Batch {
			want = 1000
		}
		if err != nil || n != want || !bytes.Equal(buf[:n], long[:n]) {
			t.Fatalf("read %d octets (want %d), %v", n, want, err)
		}
	})
}

func TestReadDeadline(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			a, b := newConn(t, "udp4", c.cfg), newConn(t, "udp4", c.cfg)
			buf := make([]byte, 100)
			_ = b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
			start := time.Now()
			_, _, err := b.ReadFrom(buf)
			var ne net.Error
			if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("ReadFrom past the deadline: %v", err)
			}
			if d := time.Since(start); d < 25*time.Millisecond || d > 2*time.Second {
				t.Fatalf("deadline of 30 ms took %v", d)
			}
			// Datagrams received and held stay across a deadline.
			sent := [][]byte{datagram(0, 10), datagram(1, 10), datagram(2, 10)}
			for _, d := range sent {
				if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(20 * time.Millisecond) // all three in the socket
			_ = b.SetReadDeadline(time.Time{})
			readAll(t, b, udpAddr(a), sent[:1])
			_ = b.SetReadDeadline(time.Now().Add(-time.Second))
			if _, _, err := b.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("ReadFrom past the deadline with datagrams held: %v", err)
			}
			readAll(t, b, udpAddr(a), sent[1:])
		})
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			b := newConn(t, "udp4", c.cfg)
			done := make(chan error, 1)
			go func() {
				_, _, err := b.ReadFrom(make([]byte, 100))
				done <- err
			}()
			// Close comes while the read waits.
			waitfor.True(t, 5*time.Second, func() bool {
				return waitfor.Blocked("github.com/iwarpgo/iwarp/sctpddp/batchconn.TestCloseUnblocksRead", "batchconn.(*Conn).ReadFrom")
			}, "the read does not wait")
			_ = b.Close()
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Fatalf("ReadFrom after Close: %v", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("ReadFrom still blocked after Close")
			}
			if _, _, err := b.ReadFrom(make([]byte, 100)); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("ReadFrom on a closed Conn: %v", err)
			}
			if _, err := b.WriteTo([]byte("x"), udpAddr(b)); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("WriteTo on a closed Conn: %v", err)
			}
		})
	}
}

// TestCloseWithDatagramsHeld checks that datagrams received but not
// handed out are not returned after Close.
func TestCloseWithDatagramsHeld(t *testing.T) {
	a, b := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
	sent := [][]byte{datagram(0, 10), datagram(1, 10)}
	for _, d := range sent {
		if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	readAll(t, b, udpAddr(a), sent[:1])
	_ = b.Close()
	if _, _, err := b.ReadFrom(make([]byte, 100)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadFrom on a closed Conn with a datagram held: %v", err)
	}
}

func TestWriteToBadAddress(t *testing.T) {
	a := newConn(t, "udp4", nil)
	for _, corked := range []bool{false, true} {
		t.Run(fmt.Sprint("corked=", corked), func(t *testing.T) {
			if corked {
				a.Cork()
				defer a.Flush()
			}
			if _, err := a.WriteTo([]byte("x"), &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)}); err == nil {
				t.Fatal("WriteTo an IPAddr succeeded")
			}
			if _, err := a.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv6loopback, Port: 9}); err == nil {
				t.Fatal("WriteTo an IPv6 address from an IPv4 socket succeeded")
			}
		})
	}
}

// TestDualStack checks an IPv6 socket bound to the unspecified address
// talking to an IPv4 one.
func TestDualStack(t *testing.T) {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		t.Skip(err)
	}
	if udpAddr(uc).IP.To4() != nil {
		_ = uc.Close()
		t.Skip("no dual-stack socket")
	}
	a, err := New(uc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newConn(t, "udp4", nil)
	from := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: udpAddr(a).Port}
	var sent [][]byte
	a.Cork()
	for i := range 20 {
		d := datagram(i, 1000)
		if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, d)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	readAll(t, b, from, sent)
	for _, d := range sent {
		if _, err := b.WriteTo(d, from); err != nil {
			t.Fatal(err)
		}
	}
	readAll(t, a, udpAddr(b), sent)
}

// dialConn makes a Conn on a loopback socket of network connected to
// peer, closed at the test's end.
func dialConn(t testing.TB, network string, peer *net.UDPAddr, cfg *Config) *Conn {
	t.Helper()
	uc, err := net.DialUDP(network, nil, peer)
	if err != nil {
		t.Fatal(err)
	}
	_ = uc.SetReadBuffer(socketBuffer)
	_ = uc.SetWriteBuffer(socketBuffer)
	c, err := New(uc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestConnected checks a Conn on a connected socket: datagrams written
// to no address or to the peer's reach the peer, at once and between
// Cork and Flush, and the peer's answers are read with its address.
func TestConnected(t *testing.T) {
	forEachConfig(t, func(t *testing.T, network string, cfg *Config) {
		b := newConn(t, network, cfg)
		a := dialConn(t, network, udpAddr(b), cfg)
		var toB [][]byte
		for i := range 20 {
			d := datagram(i, 1+i*97%3000)
			var dst net.Addr
			if i%2 == 1 {
				dst = udpAddr(b)
			}
			if _, err := a.WriteTo(d, dst); err != nil {
				t.Fatal(err)
			}
			toB = append(toB, d)
		}
		for burst := range 3 {
			a.Cork()
			for i := range 100 {
				n := 1200
				if i%23 == 22 {
					n = 300
				}
				d := datagram(burst*1000+i, n)
				if _, err := a.WriteTo(d, nil); err != nil {
					t.Fatal(err)
				}
				toB = append(toB, d)
			}
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		readAll(t, b, udpAddr(a), toB)

		var toA [][]byte
		for i := range 50 {
			d := datagram(i, 1000+i)
			if _, err := b.WriteTo(d, udpAddr(a)); err != nil {
				t.Fatal(err)
			}
			toA = append(toA, d)
		}
		readAll(t, a, udpAddr(b), toA)
	})
}

// TestConnectedRefusesOtherAddress checks that a connected Conn sends to
// its peer only, as a connected *net.UDPConn does.
func TestConnectedRefusesOtherAddress(t *testing.T) {
	b, other := newConn(t, "udp4", nil), newConn(t, "udp4", nil)
	a := dialConn(t, "udp4", udpAddr(b), nil)
	if _, err := a.WriteTo([]byte("x"), udpAddr(other)); !errors.Is(err, errNotPeer) {
		t.Fatalf("WriteTo another address: %v, want errNotPeer", err)
	}
	a.Cork()
	if _, err := a.WriteTo([]byte("x"), udpAddr(other)); !errors.Is(err, errNotPeer) {
		t.Fatalf("WriteTo another address while corked: %v, want errNotPeer", err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteTo([]byte("x"), &net.IPAddr{IP: net.IPv4(127, 0, 0, 1)}); err == nil {
		t.Fatal("WriteTo took a *net.IPAddr")
	}
}

// TestNext checks that Next hands out the datagrams ReadFrom would, in
// order and with their source, the same under every configuration.
func TestNext(t *testing.T) {
	forEachConfig(t, func(t *testing.T, network string, cfg *Config) {
		a, b := newConn(t, network, cfg), newConn(t, network, cfg)
		var sent [][]byte
		a.Cork()
		for i := range 60 {
			d := datagram(i, 1+i*53%2000)
			if _, err := a.WriteTo(d, udpAddr(b)); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, d)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
		for i, want := range sent {
			d, addr, err := b.Next()
			if err != nil {
				t.Fatalf("datagram %d: %v", i, err)
			}
			if !bytes.Equal(d, want) {
				t.Fatalf("datagram %d: got %d octets, want %d (or different content)", i, len(d), len(want))
			}
			if ua, ok := addr.(*net.UDPAddr); !ok || ua.Port != udpAddr(a).Port {
				t.Fatalf("datagram %d from %v, want %v", i, addr, udpAddr(a))
			}
		}
	})
}
