package sctp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/leaktest"
)

// udpPair returns two UDP sockets on 127.0.0.1 connected to each other.
func udpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	ca, err := net.DialUDP("udp", a.LocalAddr().(*net.UDPAddr), b.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := net.DialUDP("udp", b.LocalAddr().(*net.UDPAddr), a.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*net.UDPConn{ca, cb} {
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
	}
	return ca, cb
}

// assocPair associates a client on c and a server on s.
func assocPair(t testing.TB, c, s net.Conn, ccfg, scfg Config) (*Association, *Association) {
	t.Helper()
	type res struct {
		a   *Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, err := Server(s, scfg)
		ch <- res{a, err}
	}()
	client, err := Client(c, ccfg)
	if err != nil {
		t.Fatalf("Client: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("Server: %v", r.err)
	}
	return client, r.a
}

// testMsg builds message i of a run: its length and contents follow from
// (seed, i), and its first 8 bytes say which message it is.
func testMsg(seed uint64, i int, maxLen int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	n := 8 + r.IntN(maxLen-8+1)
	if i%7 == 0 {
		n = 8
	}
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < n; j++ {
		b[j] = byte(r.Uint32())
	}
	return b
}

// exchange sends count messages each way on streams 0 to streams-1,
// every third unordered, and checks every byte and the order of the
// ordered ones on each stream.
func exchange(t *testing.T, a, b *Association, count, maxLen int, streams uint16, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*(1+int(streams)))
	for dir, pair := range [][2]*Association{{a, b}, {b, a}} {
		seed := uint64(dir + 1)
		src, dst := pair[0], pair[1]
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range count {
				m := testMsg(seed, i, maxLen)
				sid := uint16(i) % streams
				if err := src.SendMessageContext(ctx, sid, 16+uint32(sid), i%3 == 0, [][]byte{m[:5], m[5:]}); err != nil {
					errs <- err
					return
				}
			}
		}()
		// One reader per stream, as a user of Streams reads.
		wg.Add(int(streams) - 1)
		for sid := range streams {
			go func() {
				defer wg.Done()
				st, err := dst.OpenStream(sid)
				if err != nil {
					errs <- err
					return
				}
				buf := make([]byte, 1<<17)
				last := -1
				seen := make(map[int]bool)
				for range (count - int(sid) + int(streams) - 1) / int(streams) {
					n, ppid, unordered, err := st.ReadMessage(ctx, buf)
					if err != nil {
						errs <- err
						return
					}
					i := int(binary.BigEndian.Uint64(buf))
					want := testMsg(seed, i, maxLen)
					if !bytes.Equal(buf[:n], want) || uint16(i)%streams != sid || ppid != 16+uint32(sid) || unordered != (i%3 == 0) || seen[i] {
						errs <- errors.New("message corrupted, misrouted or duplicated")
						return
					}
					seen[i] = true
					if !unordered {
						if i <= last {
							errs <- errors.New("ordered message out of order")
							return
						}
						last = i
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestAssocUDP(t *testing.T) {
	leaktest.Check(t)
	c, s := udpPair(t)
	a, b := assocPair(t, c, s, Config{}, Config{})
	exchange(t, a, b, 300, 64<<10, 5, 15*time.Second)
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("peer Close: %v", err)
	}
}
