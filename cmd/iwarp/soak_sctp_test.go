//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// soakSessions: a peer (127.0.0.1) opens 3,800 DDP Stream Sessions to
// serve sctp://, each on a new SCTP stream, on as many associations as it
// is allowed, dialing a new one when one closes; it keeps the sessions
// serve accepts. A peer behind a relay from 127.0.0.9 connects beside.
func soakSessions(t *testing.T, hold time.Duration) *soakRow {
	const n = 3800
	s, url := startSoakServe(t, "sctp://127.0.0.1:0", "--psk", soakPSK)
	row := &soakRow{attack: "3,800 DDP Stream Sessions (sctp://)", limit: 2 << 30, before: s.rss(), good: &peerStats{}}
	addr := strings.TrimPrefix(url, "sctp://")
	goodCtx, stopGood := context.WithCancel(context.Background())
	defer stopGood()
	waitGood := goodPeer{url: "sctp://" + startRelay(t, "127.0.0.9", addr)}.loop(goodCtx, row.good)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var attempts, accepted, assocs atomic.Int64
	var mu sync.Mutex
	why := map[string]int{}
	type held struct {
		a   *sctpddp.Association
		qps []*rdmap.QueuePair
	}
	var all []*held
	start := time.Now()
	var wg sync.WaitGroup
	// More workers than the associations serve allows a peer (16): the
	// rest are refused, and take an association's place when one ends.
	// They start 100 ms apart: twenty handshakes at once from one address
	// exceed its handshake limit (8), and most would be evicted.
	for k := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(k) * 100 * time.Millisecond)
			for attempts.Load() < n && ctx.Err() == nil {
				dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
				a, err := sctpddp.Dial(dctx, "udp", addr, soakSCTPConfig())
				dcancel()
				if err != nil {
					mu.Lock()
					why["association refused: "+shortErr(err)]++
					mu.Unlock()
					time.Sleep(200 * time.Millisecond)
					continue
				}
				assocs.Add(1)
				h := &held{a: a}
				mu.Lock()
				all = append(all, h)
				mu.Unlock()
				for id := uint16(1); attempts.Add(1) <= n; id += 2 {
					qp := soakQP()
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := sctpddp.Connect(cctx, a, id, qp, sctpddp.SessionConfig{})
					ccancel()
					if err == nil {
						accepted.Add(1)
						h.qps = append(h.qps, qp)
						continue
					}
					mu.Lock()
					why[sessionErr(err)]++
					mu.Unlock()
					select {
					case <-a.Done():
					default:
						continue
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(time.Until(start.Add(hold)))
	stopGood()
	waitGood()
	var reasons []string
	for k, v := range why {
		reasons = append(reasons, fmt.Sprintf("%d %s", v, k))
	}
	t.Logf("sessions: %d attempted in %v on %d associations, %d accepted; refusals: %s", min(attempts.Load(), n), took.Round(100*time.Millisecond), assocs.Load(), accepted.Load(), strings.Join(reasons, "; "))
	row.scale = fmt.Sprintf("%d opened in %v on %d associations: %d accepted, %d refused",
		min(attempts.Load(), n), took.Round(100*time.Millisecond), assocs.Load(), accepted.Load(), min(attempts.Load(), n)-accepted.Load())
	if attempts.Load() < n {
		t.Errorf("only %d sessions attempted", attempts.Load())
	}
	for _, h := range all {
		for _, qp := range h.qps {
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			qp.Close(cctx)
			ccancel()
		}
		h.a.Close()
	}
	row.good.check(t, row.attack)
	if !s.waitOpen(0, 60*time.Second) {
		t.Errorf("%d connections still open 60 s after the attacker closed its own", s.open())
	}
	s.row(row)
	s.stop()
	return row
}

// soakQP is a queue pair with a receive posted for serve's advertisement.
func soakQP() *rdmap.QueuePair {
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(8)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		panic(err)
	}
	mr, err := pd.RegisterMemory(make([]byte, 64), 0, rdmap.LocalWrite)
	if err != nil {
		panic(err)
	}
	qp.PostRecv(rdmap.RecvWR{SGL: []rdmap.SGE{{MR: mr, Length: 64}}})
	return qp
}

func sessionErr(err error) string {
	var re *ddp.RejectedError
	switch {
	case errors.As(err, &re):
		return "rejected (DDP Stream Session Reject)"
	case errors.Is(err, sctpddp.ErrSessionTerminated):
		return "terminated (DDP Stream Session Terminate)"
	case errors.Is(err, sctpddp.ErrClosed):
		return "association closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return shortErr(err)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

// soakKilledFlooder: a child process opens as many sessions as serve
// grants it (sctp://, from 127.0.0.1), floods them with RDMA Writes, and
// is killed with SIGKILL; serve must free them within 60 s. A peer behind
// a relay from 127.0.0.9 connects during the flood and while the dead
// sessions are still held.
func soakKilledFlooder(t *testing.T, hold time.Duration) *soakRow {
	s, url := startSoakServe(t, "sctp://127.0.0.1:0", "--psk", soakPSK)
	row := &soakRow{attack: "flooding sctp:// peer killed (SIGKILL)", before: s.rss(), good: &peerStats{}}
	addr := strings.TrimPrefix(url, "sctp://")
	child := exec.Command(os.Args[0], "-test.run=^TestSoakFloodPeer$", "-test.timeout=20m")
	child.Env = append(os.Environ(), "IWARP_SOAK_FLOOD="+url)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var childErr bytes.Buffer
	child.Stderr = &childErr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	ready := make(chan int, 1)
	var written atomic.Int64
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "SOAKPEER ready "); ok {
				k, _ := strconv.Atoi(v)
				ready <- k
			}
			if v, ok := strings.CutPrefix(sc.Text(), "SOAKPEER wrote "); ok {
				k, _ := strconv.ParseInt(v, 10, 64)
				written.Store(k)
			}
		}
		close(ready)
	}()
	var sessions int
	select {
	case k, ok := <-ready:
		if !ok {
			t.Fatalf("the flooding peer ended: %s", childErr.String())
		}
		sessions = k
	case <-time.After(2 * time.Minute):
		t.Fatalf("the flooding peer is not ready: %s", childErr.String())
	}
	relay := startRelay(t, "127.0.0.9", addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitGood := goodPeer{url: "sctp://" + relay}.loop(ctx, row.good)
	flood := max(5*time.Second, hold/2)
	w0 := written.Load()
	time.Sleep(flood)
	rate := float64(written.Load()-w0) / flood.Seconds() / 1e6
	ids := s.connIDs("127.0.0.1")
	rssFlood := s.rss()
	killed := time.Now()
	child.Process.Kill()
	child.Wait()
	// Every one of the child's connections closed.
	var last time.Time
	freed := 0
	for id := range ids {
		i, ev := s.waitEvent(0, time.Until(killed.Add(120*time.Second)), func(m map[string]any) bool { return m["event"] == "closed" && m["conn"] == id })
		if i < 0 {
			continue
		}
		freed++
		if ev.at.After(last) {
			last = ev.at
		}
	}
	took := last.Sub(killed)
	cancel()
	waitGood()
	row.freed = fmt.Sprintf("%.1f s", took.Seconds())
	if freed < len(ids) {
		row.freed = fmt.Sprintf("%d of %d in 120 s", freed, len(ids))
		t.Errorf("%d of the killed peer's %d sessions freed within 120 s", freed, len(ids))
	} else if took > 60*time.Second {
		t.Errorf("the killed peer's sessions were freed after %v, the issue asks within 60 s", took)
	}
	row.scale = fmt.Sprintf("%d sessions flooding RDMA Writes (%.0f MB/s) for %v (serve at %s), then SIGKILL", sessions, rate, flood.Round(time.Second), mib(rssFlood))
	row.good.check(t, row.attack)
	s.row(row)
	s.stop()
	return row
}

// TestSoakFloodPeer is TestSoakServe's flooding peer, run in a process of
// its own so that it can be killed without a goodbye: it connects to the
// sctp:// serve at IWARP_SOAK_FLOOD (skipped without it) as many times as
// it is allowed, says "SOAKPEER ready N" on stdout, and RDMA Writes 64 KiB
// after 64 KiB on every session until it is killed.
func TestSoakFloodPeer(t *testing.T) {
	url := os.Getenv("IWARP_SOAK_FLOOD")
	if url == "" {
		t.Skip("TestSoakServe's flooding peer")
	}
	type sess struct {
		qp     *rdmap.QueuePair
		cq     *rdmap.CompletionQueue
		data   *rdmap.MemoryRegion
		rb     rdmap.RemoteBuffer
		closer *iwarp.Conn
	}
	var ss []*sess
	for range 24 {
		dev := rdmap.NewDevice(rdmap.DeviceConfig{})
		pd := dev.NewProtectionDomain()
		scq, rcq := dev.NewCompletionQueue(64), dev.NewCompletionQueue(4)
		qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq})
		if err != nil {
			t.Fatal(err)
		}
		adv, _ := pd.RegisterMemory(make([]byte, 64), 0, rdmap.LocalWrite)
		qp.PostRecv(rdmap.RecvWR{SGL: []rdmap.SGE{{MR: adv, Length: 64}}})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		c, err := iwarp.Dial(ctx, url, qp, &iwarp.Config{SCTP: soakSCTPConfig()})
		if err != nil {
			cancel()
			fmt.Fprintln(os.Stderr, "refused:", err)
			continue
		}
		cp, err := rcq.Wait(ctx)
		cancel()
		if err != nil || cp.Status != rdmap.StatusSuccess {
			fmt.Fprintln(os.Stderr, "no advertisement:", err, cp.Status)
			continue
		}
		rb, _, err := rdmap.ParseRemoteBuffer(adv.Bytes()[:cp.ByteLen])
		if err != nil {
			t.Fatal(err)
		}
		data, _ := pd.RegisterMemory(bytes.Repeat([]byte{0xf1}, 64<<10), 0, rdmap.LocalWrite)
		ss = append(ss, &sess{qp: qp, cq: scq, data: data, rb: rb, closer: c})
	}
	fmt.Printf("SOAKPEER ready %d\n", len(ss))
	var written atomic.Int64
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			fmt.Printf("SOAKPEER wrote %d\n", written.Load())
		}
	}()
	for _, s := range ss {
		go func() {
			post := func(i uint64) error {
				off := (i % uint64(s.rb.Len/(64<<10))) * 64 << 10
				return s.qp.PostWrite(rdmap.WriteWR{ID: i, SGL: []rdmap.SGE{{MR: s.data, Length: 64 << 10}}, RemoteSTag: s.rb.STag, RemoteTO: s.rb.TO + off})
			}
			var i uint64
			for ; i < 16; i++ {
				post(i)
			}
			for {
				cp, err := s.cq.Wait(context.Background())
				if err != nil || cp.Status != rdmap.StatusSuccess {
					fmt.Fprintln(os.Stderr, "flood ended:", err, cp.Status)
					return
				}
				written.Add(64 << 10)
				post(i)
				i++
			}
		}()
	}
	time.Sleep(15 * time.Minute)
}

// soakDTLSJunk: datagrams that look like the start of a DTLS handshake
// (a record header and random octets; ClientHellos with random contents;
// a genuine ClientHello replayed) at 10,000 a second, from 512 source
// addresses on 127.0.0.32-47, for max(8 s, hold), at serve sctp://; a
// peer behind a relay from 127.0.0.9 connects meanwhile.
func soakDTLSJunk(t *testing.T, hold time.Duration) *soakRow {
	const rate = 10000
	dur := max(8*time.Second, hold)
	s, url := startSoakServe(t, "sctp://127.0.0.1:0", "--psk", soakPSK)
	row := &soakRow{attack: "spoofed DTLS junk (sctp://)", limit: 500 << 20, before: s.rss(), good: &peerStats{}}
	addr := strings.TrimPrefix(url, "sctp://")
	target, _ := net.ResolveUDPAddr("udp", addr)
	hello := captureClientHello(t)
	var socks []*net.UDPConn
	for ip := 32; ip < 48; ip++ {
		for range 32 {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(ip))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			socks = append(socks, c)
		}
	}
	kinds := make([][]byte, 0, 257)
	for i := range 128 {
		kinds = append(kinds, dtlsJunk(100+7*i), forgedClientHello(120+5*i))
	}
	kinds = append(kinds, hello)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	relay := startRelay(t, "127.0.0.9", addr)
	var sent, sendErrs int64
	udp0 := udpCounters()
	start := time.Now()
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int64(time.Since(start).Seconds()*rate) - sent
			for ; due > 0; due-- {
				var d []byte
				if sent%3 == 2 {
					d = hello
				} else {
					d = kinds[sent%int64(len(kinds))]
				}
				if _, err := socks[sent%int64(len(socks))].WriteToUDP(d, target); err != nil {
					sendErrs++
				}
				sent++
			}
		}
	}()
	time.Sleep(time.Second)
	waitGood := goodPeer{url: "sctp://" + relay}.loop(ctx, row.good)
	<-floodDone
	elapsed := time.Since(start)
	udp1 := udpCounters()
	waitGood()
	t.Logf("UDP on this machine during the flood: %d datagrams received, %d dropped for a full socket buffer (RcvbufErrors)",
		udp1["InDatagrams"]-udp0["InDatagrams"], udp1["RcvbufErrors"]-udp0["RcvbufErrors"])
	row.scale = fmt.Sprintf("%d datagrams in %.1f s (%.0f/s) from %d addresses on 16 IPs, a third real ClientHellos", sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds(), len(socks))
	if float64(sent)/elapsed.Seconds() < 0.95*rate {
		t.Errorf("the flood reached %.0f datagrams a second, not %d", float64(sent)/elapsed.Seconds(), rate)
	}
	if sendErrs > 0 {
		t.Logf("%d datagrams failed to send", sendErrs)
	}
	row.good.check(t, row.attack)
	// A peer still connects once the flood is over.
	if _, err := (goodPeer{url: "sctp://" + relay}).once(); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	s.row(row)
	s.stop()
	return row
}

// udpCounters returns the Udp line of /proc/net/snmp.
func udpCounters() map[string]int64 {
	b, _ := os.ReadFile("/proc/net/snmp")
	var names []string
	m := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, v := range f[1:] {
			if i < len(names) {
				m[names[i]], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return m
}

// dtlsJunk is a DTLS handshake record header (epoch 0, a consistent
// length) followed by random octets.
func dtlsJunk(n int) []byte {
	b := make([]byte, n)
	crand.Read(b)
	b[0], b[1], b[2], b[3], b[4] = 22, 0xfe, 0xfd, 0, 0
	binary.BigEndian.PutUint16(b[11:13], uint16(n-13))
	return b
}

// forgedClientHello is a record whose headers are a consistent
// ClientHello's (handshake type 1, whole, DTLS 1.2) and whose body is
// random: it passes for a ClientHello until parsed.
func forgedClientHello(body int) []byte {
	b := dtlsJunk(13 + 12 + body)
	h := b[13:]
	h[0] = 1
	put24 := func(p []byte, v int) { p[0], p[1], p[2] = byte(v>>16), byte(v>>8), byte(v) }
	put24(h[1:4], body)
	h[4], h[5] = 0, 0
	put24(h[6:9], 0)
	put24(h[9:12], body)
	h[12], h[13] = 0xfe, 0xfd
	return b
}

// captureClientHello returns the first datagram of a DTLS/SCTP client
// with the servers' key: a genuine ClientHello.
func captureClientHello(t *testing.T) []byte {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := soakSCTPConfig()
		cfg.HandshakeTimeout = 3 * time.Second
		sctpddp.Dial(ctx, "udp", sink.LocalAddr().String(), cfg)
	}()
	buf := make([]byte, 2048)
	sink.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := sink.ReadFrom(buf)
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf[:n]...)
}
