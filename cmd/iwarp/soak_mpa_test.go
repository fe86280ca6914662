//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
)

// soakBadCRC: RDMA Writes with a wrong MPA CRC, one connection after
// another from 127.0.0.2, each after a good Write; the region serve
// reports at the close holds the good Write and nothing of the bad one.
func soakBadCRC(t *testing.T, hold time.Duration) *soakRow {
	s, url := startSoakServe(t, "tcp://127.0.0.1:0")
	row := &soakRow{attack: "bad-CRC RDMA Writes (tcp://)", before: s.rss(), good: &peerStats{}}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	waitGood := goodPeer{url: url, from: "127.0.0.9"}.loop(ctx, row.good)
	addr := strings.TrimPrefix(url, "tcp://")
	base := expectedRegion(1 << 20)
	n, unchanged := 0, 0
	var firstErr error
	for ctx.Err() == nil {
		n++
		err := badCRCOnce(s, addr, base)
		if err == nil {
			unchanged++
		} else if firstErr == nil {
			firstErr = err
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitGood()
	if unchanged != n {
		t.Errorf("%d of %d bad-CRC Writes: %v", n-unchanged, n, firstErr)
	}
	row.scale = fmt.Sprintf("%d bad-CRC Writes, each after a good one: %d regions hold the good Write only", n, unchanged)
	row.good.check(t, row.attack)
	s.waitOpen(0, 10*time.Second)
	s.row(row)
	s.stop()
	return row
}

// badCRCOnce connects from 127.0.0.2 with a hand-made MPA Request,
// writes 1024 octets with a good CRC and 2000 with a bad one, expects
// serve's Terminate (MPA CRC Error), and checks the region's SHA-256 in
// serve's closed event: the good Write in it, nothing of the bad one.
func badCRCOnce(s *proc, addr string, base []byte) error {
	from := s.nEvents()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Write(mpaStartup()); err != nil {
		return err
	}
	rep, err := mpa.ReadFrame(c)
	if err != nil {
		return fmt.Errorf("MPA Reply: %v", err)
	}
	if !rep.Reply || rep.Reject || rep.Markers {
		return fmt.Errorf("MPA Reply %v", rep)
	}
	opts := mpa.Options{CRC: true}
	r := mpa.NewReader(c, opts)
	u, err := r.Next()
	if err != nil {
		return fmt.Errorf("the advertisement: %v", err)
	}
	_, hl, err := ddp.ParseHeader(u)
	if err != nil {
		return err
	}
	rb, _, err := rdmap.ParseRemoteBuffer(u[hl:])
	if err != nil {
		return fmt.Errorf("the advertisement: %v", err)
	}
	off := uint64(rand.IntN(int(rb.Len)-4096)) &^ 3
	good := bytes.Repeat([]byte{'G'}, 1024)
	hdr := ddp.Header{Tagged: true, Last: true, DV: ddp.Version, STag: rb.STag, TO: rb.TO + off}
	hdr.RsvdULP[0] = byte(rdmap.MakeControl(rdmap.OpWrite))
	pos := uint64(len(mpaStartup()) - mpa.FrameHeaderLen - ddp.EnhancedDataLen)
	f, err := mpa.AppendFPDU(nil, pos, opts, append(hdr.Append(nil), good...))
	if err != nil {
		return err
	}
	hdr.TO = rb.TO + off + 1024
	f, err = mpa.AppendFPDU(f, pos+uint64(len(f)), opts, append(hdr.Append(nil), bytes.Repeat([]byte{0xee}, 2000)...))
	if err != nil {
		return err
	}
	f[len(f)-1] ^= 0x01
	if _, err := c.Write(f); err != nil {
		return err
	}
	u, err = r.Next()
	if err != nil {
		return fmt.Errorf("no Terminate: %v", err)
	}
	th, _, err := rdmap.ParseTerminate(u[ddp.UntaggedHeaderLen:])
	if err != nil || !errors.Is(th.Err(), term.MPACRCError) {
		return fmt.Errorf("Terminate %v, %v", th.Err(), err)
	}
	local := c.LocalAddr().String()
	i, ev := s.waitEvent(from, 10*time.Second, func(m map[string]any) bool { return m["event"] == "connected" && m["peer"] == local })
	if i < 0 {
		return errors.New("no connected event")
	}
	id := ev.m["conn"]
	if i, _ = s.waitEvent(from, 10*time.Second, func(m map[string]any) bool {
		return m["event"] == "terminate" && m["conn"] == id && m["origin"] == "local" && m["ecode"] == float64(term.MPACRCError.Code)
	}); i < 0 {
		return errors.New("serve reported no MPA CRC Error")
	}
	i, ev = s.waitEvent(from, 10*time.Second, func(m map[string]any) bool { return m["event"] == "closed" && m["conn"] == id })
	if i < 0 {
		return errors.New("no closed event")
	}
	want := append([]byte(nil), base...)
	copy(want[off:], good)
	if got := ev.m["mr_sha256"]; got != sum(want) {
		if got == sum(base) {
			return errors.New("the region lost the good Write")
		}
		return errors.New("the region changed beyond the good Write")
	}
	return nil
}

// mpaStartup is what an MPA initiator sends first, in one write: an MPA
// Request (revision 2, CRCs, the peer-to-peer model with a zero-length
// RDMA Write as RTR, IRD and ORD 1) and that RTR, the first FPDU, without
// waiting for the Reply (serve's defaults accept it as it is).
func mpaStartup() []byte {
	e := ddp.EnhancedData{PeerToPeer: true, WriteRTR: true, IRD: 1, ORD: 1}
	b := (&mpa.Frame{Rev: 2, CRC: true, Enhanced: true, PrivateData: e.Append(nil)}).Append(nil)
	hdr := ddp.Header{Tagged: true, Last: true, DV: ddp.Version}
	hdr.RsvdULP[0] = byte(rdmap.MakeControl(rdmap.OpWrite))
	b, err := mpa.AppendFPDU(b, 0, mpa.Options{CRC: true}, hdr.Append(nil))
	if err != nil {
		panic(err)
	}
	return b
}

// soakSilent: 3,800 connections from 127.0.0.2 that send a valid MPA
// Request and then nothing (withRequest), or nothing at all, held for
// hold beside a well-behaved peer.
func soakSilent(t *testing.T, hold time.Duration, withRequest bool) *soakRow {
	const n = 3800
	s, url := startSoakServe(t, "tcp://127.0.0.1:0")
	row := &soakRow{attack: "3,800 silent MPA connections (tcp://)", limit: 2 << 30, before: s.rss(), good: &peerStats{}}
	if !withRequest {
		row.attack = "3,800 TCP connections sending nothing"
	}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	waitGood := goodPeer{url: url, from: "127.0.0.9"}.loop(ctx, row.good)
	addr := strings.TrimPrefix(url, "tcp://")
	req := mpaStartup()
	conns := make([]net.Conn, n)
	var next, dialErrs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					dialErrs.Add(1)
					continue
				}
				if withRequest {
					c.Write(req)
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	opened := time.Since(start)
	<-ctx.Done()
	waitGood()
	// Which of the attacker's connections are still open at the server?
	var open atomic.Int64
	next.Store(0)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				c := conns[i]
				if c == nil {
					continue
				}
				c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				for {
					_, err := c.Read(buf)
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						open.Add(1)
						break
					}
					if err != nil {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	served := s.count("connected", "127.0.0.2")
	closed := n - int(dialErrs.Load()) - int(open.Load())
	if dialErrs.Load() > 0 {
		t.Logf("%d of the attacker's connections failed to open", dialErrs.Load())
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	row.good.check(t, row.attack)
	if !s.waitOpen(0, 15*time.Second) {
		t.Errorf("%d connections still open 15 s after the attacker closed its own", s.open())
	}
	s.row(row)
	s.stop()
	// After the stop, which reports the refusals serve held back: the
	// good peer is never refused, so they are all the attacker's.
	refused := s.count("refused", "127.0.0.2") + s.unreported()
	row.scale = fmt.Sprintf("%d opened in %v: %d served, %d refused (R=1), %d closed unanswered; %d open after %v",
		n-int(dialErrs.Load()), opened.Round(100*time.Millisecond), served, refused, closed-refused, open.Load(), hold.Round(time.Second))
	return row
}
