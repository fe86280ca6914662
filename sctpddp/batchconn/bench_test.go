//go:build !js

package batchconn

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks move b.N datagrams (or DTLS records) one way over
// loopback between two sockets, in bursts of benchBurst, with the sender
// at most benchWindow bursts ahead of the receiver so that no socket
// buffer overflows: a lost datagram fails the benchmark rather than
// passing for speed. Each size runs over plain *net.UDPConns, over Conns
// without GSO and GRO, and over Conns with them; the Conns' senders Cork
// and Flush around each burst.

const (
	benchBurst  = 64
	benchWindow = 4
	benchStall  = 10 * time.Second
)

var benchSizes = []int{1200, 1472, 8000}

type benchMode struct {
	name  string
	batch bool
	cfg   *Config
}

var benchModes = []benchMode{
	{"plain", false, nil},
	{"batch", true, &Config{DisableGSO: true, DisableGRO: true}},
	{"gso-gro", true, nil},
}

// benchPair opens the sender's and the receiver's sockets of mode m.
func benchPair(b *testing.B, m benchMode) (tx, rx net.PacketConn) {
	if !m.batch {
		tx, rx = listenUDP(b, "udp4"), listenUDP(b, "udp4")
		b.Cleanup(func() {
			_ = tx.Close()
			_ = rx.Close()
		})
		return tx, rx
	}
	return newConn(b, "udp4", m.cfg), newConn(b, "udp4", m.cfg)
}

// cork and flush bracket a burst on a Conn, and do nothing on a plain
// socket.
func cork(pc net.PacketConn) {
	if c, ok := pc.(*Conn); ok {
		c.Cork()
	}
}

func flush(pc net.PacketConn) error {
	if c, ok := pc.(*Conn); ok {
		return c.Flush()
	}
	return nil
}

// credits lets the sender run at most benchWindow bursts ahead.
func newCredits() chan struct{} {
	ch := make(chan struct{}, benchWindow)
	for range benchWindow {
		ch <- struct{}{}
	}
	return ch
}

// receive reads n messages of size octets with read, returning a credit
// after each burst; it stops at the first error or a message of another
// length. A read that waits benchStall means a datagram was lost (or
// the machine stalled: the error says which, from the kernel's count of
// drops). gap receives the longest wait from one burst's first message
// to the next's.
func receive(n, size int, setDeadline func(time.Time) error, read func([]byte) (int, error), credits chan<- struct{}, gap *time.Duration) error {
	buf := make([]byte, 9000)
	last := time.Now()
	for i := range n {
		if i%benchBurst == 0 {
			_ = setDeadline(time.Now().Add(benchStall))
		}
		m, err := read(buf)
		if err != nil {
			return fmt.Errorf("received %d of %d: %w", i, n, err)
		}
		if m != size {
			return fmt.Errorf("message %d: %d octets, want %d", i, m, size)
		}
		if i%benchBurst == 0 {
			now := time.Now()
			*gap = max(*gap, now.Sub(last))
			last = now
		}
		if i%benchBurst == benchBurst-1 {
			credits <- struct{}{}
		}
	}
	return nil
}

// reportStats adds a Conn's system calls per datagram to the results,
// the datagrams the receiving socket dropped (none, or the receiver
// would have waited for them and failed), and the CPU time of both ends
// a datagram.
func reportStats(b *testing.B, tx, rx net.PacketConn, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if c, ok := tx.(*Conn); ok {
		s := c.Stats()
		b.ReportMetric(float64(s.SendCalls)/float64(b.N), "sendcalls/op")
	}
	if c, ok := rx.(*Conn); ok {
		s := c.Stats()
		b.ReportMetric(float64(s.RecvCalls)/float64(b.N), "recvcalls/op")
	}
	b.ReportMetric(float64(socketDrops(rx)), "drops")
}

func BenchmarkDatagrams(b *testing.B) {
	for _, size := range benchSizes {
		for _, m := range benchModes {
			b.Run(fmt.Sprintf("size=%d/%s", size, m.name), func(b *testing.B) {
				tx, rx := benchPair(b, m)
				to := rx.LocalAddr()
				p := datagram(0, size)
				credits := newCredits()
				done := make(chan error, 1)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				before := rcvbufErrors()
				b.ResetTimer()
				cpu := processCPU()
				var gap time.Duration
				go func() {
					done <- receive(b.N, size, rx.SetReadDeadline, func(buf []byte) (int, error) {
						n, _, err := rx.ReadFrom(buf)
						return n, err
					}, credits, &gap)
				}()
				if err := sendBursts(b.N, credits, done, tx, func() error {
					_, err := tx.WriteTo(p, to)
					return err
				}); err != nil {
					b.Fatalf("%v (receiver socket drops: %d; system RcvbufErrors meanwhile: %d)", err, socketDrops(rx), rcvbufErrors()-before)
				}
				if err := <-done; err != nil {
					b.Fatalf("%v (receiver socket drops: %d; system RcvbufErrors meanwhile: %d)", err, socketDrops(rx), rcvbufErrors()-before)
				}
				b.StopTimer()
				reportStats(b, tx, rx, processCPU()-cpu)
				b.ReportMetric(float64(gap.Microseconds())/1000, "maxgap-ms")
			})
		}
	}
}

// sendBursts calls write n times, in bursts of benchBurst between cork
// and flush of tx, each burst on a credit from the receiver (or its end,
// which done reports).
func sendBursts(n int, credits <-chan struct{}, done chan error, tx net.PacketConn, write func() error) error {
	for i := 0; i < n; i += benchBurst {
		select {
		case <-credits:
		case err := <-done:
			done <- err
			return fmt.Errorf("receiver stopped: %v", err)
		}
		cork(tx)
		for k := i; k < min(n, i+benchBurst); k++ {
			if err := write(); err != nil {
				return err
			}
		}
		if err := flush(tx); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkDTLS moves DTLS records of pion/dtls (PSK, AES-128-GCM) over
// each kind of socket; the size is the records' payload.
func BenchmarkDTLS(b *testing.B) {
	for _, size := range benchSizes {
		for _, m := range benchModes {
			b.Run(fmt.Sprintf("size=%d/%s", size, m.name), func(b *testing.B) {
				tx, rx := benchPair(b, m)
				client, server := dtlsPair(b, tx, rx)
				p := datagram(0, size)
				credits := newCredits()
				done := make(chan error, 1)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				before := rcvbufErrors()
				b.ResetTimer()
				cpu := processCPU()
				var gap time.Duration
				go func() {
					done <- receive(b.N, size, server.SetReadDeadline, server.Read, credits, &gap)
				}()
				if err := sendBursts(b.N, credits, done, tx, func() error {
					_, err := client.Write(p)
					return err
				}); err != nil {
					b.Fatalf("%v (receiver socket drops: %d; system RcvbufErrors meanwhile: %d)", err, socketDrops(rx), rcvbufErrors()-before)
				}
				if err := <-done; err != nil {
					b.Fatalf("%v (receiver socket drops: %d; system RcvbufErrors meanwhile: %d)", err, socketDrops(rx), rcvbufErrors()-before)
				}
				b.StopTimer()
				reportStats(b, tx, rx, processCPU()-cpu)
				b.ReportMetric(float64(gap.Microseconds())/1000, "maxgap-ms")
			})
		}
	}
}

// rcvbufErrors returns the system's count of UDP datagrams dropped for a
// full receive buffer (Udp: RcvbufErrors of /proc/net/snmp), or 0 where
// there is none. Other processes' sockets count too.
func rcvbufErrors() uint64 {
	f, err := os.Open("/proc/net/snmp")
	if err != nil {
		return 0
	}
	defer f.Close()
	n, _ := parseRcvbufErrors(f)
	return n
}

// parseRcvbufErrors finds RcvbufErrors in the Udp: lines of
// /proc/net/snmp, a line of names and a line of values.
func parseRcvbufErrors(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("no Udp: RcvbufErrors")
}

// socketDrops returns the datagrams the kernel dropped for pc's socket
// (the drops column of /proc/net/udp), or 0 where it cannot tell.
func socketDrops(pc net.PacketConn) uint64 {
	port := pc.LocalAddr().(*net.UDPAddr).Port
	for _, name := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		n, ok := parseSocketDrops(f, port)
		f.Close()
		if ok {
			return n
		}
	}
	return 0
}

// parseSocketDrops finds the socket bound to port in a table of
// /proc/net/udp's form and returns its drops, the last column.
func parseSocketDrops(r io.Reader, port int) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 13 {
			continue
		}
		_, p, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(p, 16, 16); err != nil || int(v) != port {
			continue
		}
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		return n, err == nil
	}
	return 0, false
}
