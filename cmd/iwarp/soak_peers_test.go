//go:build linux

package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// goodPeer is a well-behaved client of serve: from a tcp:// address of
// its own (from), or through a relay whose upstream address is its own
// (sctp://).
type goodPeer struct {
	url  string
	from string // tcp://: the local IP address
}

// once connects, waits for the advertisement, RDMA Writes 64 KiB at a
// random offset of the region, reads it back and compares, and closes.
// It returns the time to the advertisement.
func (g goodPeer) once() (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	scq, rcq := dev.NewCompletionQueue(16), dev.NewCompletionQueue(16)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq})
	if err != nil {
		return 0, err
	}
	reg := func(b []byte) *rdmap.MemoryRegion {
		mr, err := pd.RegisterMemory(b, 0, rdmap.LocalWrite)
		if err != nil {
			panic(err)
		}
		return mr
	}
	adv := reg(make([]byte, 64))
	qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 64}}})
	start := time.Now()
	var closeConn func(context.Context)
	ep, _ := endpoint.Parse(g.url)
	if ep.Scheme == "tcp" {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(g.from)}}
		nc, err := d.DialContext(ctx, "tcp", ep.Addr)
		if err != nil {
			return 0, fmt.Errorf("tcp: %w", err)
		}
		if _, err := mpa.Client(ctx, nc, qp, nil); err != nil {
			nc.Close()
			return 0, fmt.Errorf("mpa: %w", err)
		}
		closeConn = func(ctx context.Context) { qp.Close(ctx) }
	} else {
		c, err := iwarp.Dial(ctx, g.url, qp, &iwarp.Config{SCTP: soakSCTPConfig()})
		if err != nil {
			return 0, err
		}
		closeConn = func(ctx context.Context) { c.Shutdown(ctx) }
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		closeConn(cctx)
		cancel()
	}()
	wait := func(cq *rdmap.CompletionQueue, what string) (rdmap.Completion, error) {
		cp, err := cq.Wait(ctx)
		if err != nil {
			return cp, fmt.Errorf("%s: %v (qp: %v)", what, err, qp.Err())
		}
		if cp.Status != rdmap.StatusSuccess {
			return cp, fmt.Errorf("%s: %v: %v", what, cp.Status, cp.Err)
		}
		return cp, nil
	}
	cp, err := wait(rcq, "the advertisement")
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	rb, _, err := rdmap.ParseRemoteBuffer(adv.Bytes()[:cp.ByteLen])
	if err != nil {
		return 0, err
	}
	data := make([]byte, 64<<10)
	crand.Read(data)
	off := uint64(rand.IntN(int(rb.Len)-len(data)+1)) &^ 7
	if err := qp.PostWrite(rdmap.WriteWR{ID: 2, SGL: []rdmap.SGE{{MR: reg(data), Length: uint32(len(data))}}, RemoteSTag: rb.STag, RemoteTO: rb.TO + off}); err != nil {
		return 0, err
	}
	if _, err := wait(scq, "the Write"); err != nil {
		return 0, err
	}
	sink := reg(make([]byte, len(data)))
	if err := qp.PostRead(rdmap.ReadWR{ID: 3, Local: rdmap.SGE{MR: sink, Length: uint32(len(data))}, RemoteSTag: rb.STag, RemoteTO: rb.TO + off}); err != nil {
		return 0, err
	}
	if _, err := wait(scq, "the Read"); err != nil {
		return 0, err
	}
	if !bytes.Equal(sink.Bytes(), data) {
		return 0, errors.New("the Read returned other bytes than the Write wrote")
	}
	return took, nil
}

// loop runs once a second until ctx is done; the returned function waits
// for the last attempt.
func (g goodPeer) loop(ctx context.Context, s *peerStats) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d, err := g.once()
			s.add(d, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { <-done }
}

func soakSCTPConfig() *sctpddp.Config {
	return &sctpddp.Config{PSK: []byte(soakPSK), PSKIdentity: []byte("iwarp"), MTU: sctpddp.LoopbackMTU}
}

// udpRelay forwards datagrams between its address (on 127.0.0.1) and a
// target, each client address through a socket of its own bound to the
// IP address from: a DTLS/SCTP client behind it is, for the target, a
// peer at from. (sctpddp.Dial binds no address of the caller's choosing.)
type udpRelay struct {
	pc     *net.UDPConn
	target *net.UDPAddr
	from   net.IP
	mu     sync.Mutex
	ups    map[string]*net.UDPConn
}

func startRelay(t *testing.T, from, target string) string {
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{pc: pc, target: ta, from: net.ParseIP(from), ups: map[string]*net.UDPConn{}}
	go r.run()
	t.Cleanup(func() {
		pc.Close()
		r.mu.Lock()
		for _, u := range r.ups {
			u.Close()
		}
		r.mu.Unlock()
	})
	return pc.LocalAddr().String()
}

func (r *udpRelay) run() {
	buf := make([]byte, 65536)
	for {
		n, addr, err := r.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		up := r.ups[addr.String()]
		if up == nil {
			if up, err = net.DialUDP("udp", &net.UDPAddr{IP: r.from}, r.target); err != nil {
				r.mu.Unlock()
				continue
			}
			r.ups[addr.String()] = up
			go func() {
				b := make([]byte, 65536)
				for {
					n, err := up.Read(b)
					if errors.Is(err, net.ErrClosed) {
						return
					}
					if err == nil {
						r.pc.WriteToUDP(b[:n], addr)
					}
				}
			}()
		}
		r.mu.Unlock()
		up.Write(buf[:n])
	}
}
