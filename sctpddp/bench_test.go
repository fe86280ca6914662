//go:build !js

package sctpddp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/pion/dtls/v3"
	"github.com/pion/sctp"
)

const benchMessage = 64 << 10

// benchBatch is how many 64 KiB messages a mover moves before it waits
// for the receiver: 4 MiB, several times the send queue cap, so that the
// pipeline runs full for most of a batch.
const benchBatch = 64

// BenchmarkThroughput sends 64 KiB messages over one stream on loopback,
// DTLS over UDP, and measures until the receiver has them all.
//
//   - pion-defaults: pion/dtls and pion/sctp as they come (MTU 1191, 1 MiB
//     receive window, OS-default UDP buffers, ordered stream), with the
//     sender waiting while more than the peer's 1 MiB window is queued
//     (pion queues without limit otherwise).
//   - tuned-*: Dial/Listen with this package's defaults (4 MiB UDP
//     buffers, 256 KiB send queue cap, unordered stream) at the MTU named.
//
// Run: go test -run XXX -bench Throughput -benchtime 300x ./sctpddp
func BenchmarkThroughput(b *testing.B) {
	b.Run("pion-defaults/64KiB", func(b *testing.B) { benchMover(b, newPionDefaultsMover(b)) })
	b.Run("tuned-mtu1350/64KiB", func(b *testing.B) { benchTuned(b, DefaultMTU, false) })
	b.Run("tuned-mtu8000/64KiB", func(b *testing.B) { benchTuned(b, LoopbackMTU, false) })
	b.Run("tuned-mtu1350/MULPDU-segments", func(b *testing.B) { benchTuned(b, DefaultMTU, true) })
	b.Run("tuned-mtu8000/MULPDU-segments", func(b *testing.B) { benchTuned(b, LoopbackMTU, true) })
}

// BenchmarkRDMAWrite measures 64 KiB RDMA Writes from one rdmap queue
// pair to another through a DDP Stream Session on one stream of an
// association (DTLS/UDP on loopback), until the target has them (each
// batch ends with a Send that the target receives after every Write is
// placed, DDP delivering in DDP-SSN order).
//
//   - sctpddp/mtu*: the RDMA Writes alone, at this package's default MTU
//     (safe for a 1500-byte path) and at LoopbackMTU.
//   - vs-raw-tuned/mtu*: the same RDMA Writes alternating, batch by batch,
//     with raw 64 KiB SCTP messages on a second association with the same
//     Config (MTU, UDP buffers, receive window, send queue cap, unordered
//     stream): what the DDP/RDMAP layers and RFC 5043 framing cost.
//     Metrics: iwarp-MB/s, raw-MB/s, ratio = iwarp/raw (target >= 0.9).
//   - vs-pion-defaults/mtu1350: the RDMA Writes with this package's
//     defaults alternating with raw 64 KiB messages over pion/dtls and
//     pion/sctp with pion's defaults (see BenchmarkThroughput). Metrics as
//     above, ratio target >= 2.
//
// The MB/s of a vs-* benchmark counts the bytes of both sides (2 x 64 KiB
// per op); iwarp-MB/s and raw-MB/s are each side's own rate over the time
// it ran. cpu% is the process's CPU time (user + system, both ends of the
// connection, from /proc/self/stat where there is one) over wall time;
// 200% is both cores of a 2-core machine.
//
// Run: go test -run XXX -bench RDMAWrite -benchtime 400x -count 3 ./sctpddp
func BenchmarkRDMAWrite(b *testing.B) {
	b.Run("sctpddp/mtu1350/64KiB", func(b *testing.B) { benchMover(b, newRDMAWriteMover(b, DefaultMTU, nil)) })
	b.Run("sctpddp/mtu8000/64KiB", func(b *testing.B) { benchMover(b, newRDMAWriteMover(b, LoopbackMTU, nil)) })
	b.Run("vs-raw-tuned/mtu1350/64KiB", func(b *testing.B) {
		benchCompare(b, newRDMAWriteMover(b, DefaultMTU, nil), newRawStreamMover(b, DefaultMTU, nil))
	})
	b.Run("vs-raw-tuned/mtu8000/64KiB", func(b *testing.B) {
		benchCompare(b, newRDMAWriteMover(b, LoopbackMTU, nil), newRawStreamMover(b, LoopbackMTU, nil))
	})
	b.Run("vs-pion-defaults/mtu1350/64KiB", func(b *testing.B) {
		benchCompare(b, newRDMAWriteMover(b, DefaultMTU, nil), newPionDefaultsMover(b))
	})
}

// A mover moves n 64 KiB messages to its receiver and returns once the
// receiver has all of them.
type mover interface {
	move(b *testing.B, n int)
}

// benchMover measures one mover: b.N messages, SetBytes(64 KiB).
func benchMover(b *testing.B, m mover) {
	m.move(b, 4) // warm up: connection state, buffers, pion's cwnd
	b.SetBytes(benchMessage)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		k := min(benchBatch, b.N-done)
		m.move(b, k)
		done += k
	}
	wall := time.Since(start)
	b.StopTimer()
	if cpu0 >= 0 && wall >= minCPUWall {
		b.ReportMetric(100*float64(cpuTime()-cpu0)/float64(wall), "cpu%")
	}
}

// benchCompare runs iwarp and raw alternately, benchBatch messages at a
// time, starting with each on every other batch, and reports each one's
// rate and the ratio.
func benchCompare(b *testing.B, iwarp, raw mover) {
	iwarp.move(b, 4)
	raw.move(b, 4)
	b.SetBytes(2 * benchMessage)
	b.ReportAllocs()
	var tIwarp, tRaw, cIwarp, cRaw time.Duration
	timed := func(m mover, k int, wall, cpu *time.Duration) {
		c0, t0 := cpuTime(), time.Now()
		m.move(b, k)
		*wall += time.Since(t0)
		*cpu += cpuTime() - c0
	}
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		k := min(benchBatch, b.N-done)
		if round%2 == 0 {
			timed(iwarp, k, &tIwarp, &cIwarp)
			timed(raw, k, &tRaw, &cRaw)
		} else {
			timed(raw, k, &tRaw, &cRaw)
			timed(iwarp, k, &tIwarp, &cIwarp)
		}
		done += k
	}
	b.StopTimer()
	bytes := float64(b.N) * benchMessage
	b.ReportMetric(bytes/1e6/tIwarp.Seconds(), "iwarp-MB/s")
	b.ReportMetric(bytes/1e6/tRaw.Seconds(), "raw-MB/s")
	b.ReportMetric(tRaw.Seconds()/tIwarp.Seconds(), "ratio")
	if cpuTime() >= 0 && min(tIwarp, tRaw) >= minCPUWall {
		b.ReportMetric(100*float64(cIwarp)/float64(tIwarp), "iwarp-cpu%")
		b.ReportMetric(100*float64(cRaw)/float64(tRaw), "raw-cpu%")
	}
}

// minCPUWall is the shortest run whose CPU use is reported: cpuTime
// counts in 10 ms ticks.
const minCPUWall = 200 * time.Millisecond

// cpuTime returns the CPU time (user + system) the process has used, from
// /proc/self/stat, or -1 where there is none.
func cpuTime() time.Duration {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	// The fields after the command name (which may hold spaces) start
	// with the state, field 3; utime and stime are fields 14 and 15, in
	// clock ticks of 1/100 s (USER_HZ).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+s) * 10 * time.Millisecond
}

func benchCtx(b testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// benchAssociations returns both ends of an association made by Listen
// and Dial with pinned certificates and the given MTU, closed at the end.
// tune, if not nil, changes both Configs.
func benchAssociations(b testing.TB, mtu uint32, tune func(*Config)) (server, client *Association) {
	ctx := benchCtx(b)
	srv, cli := pinnedConfigs(b)
	srv.MTU, cli.MTU = mtu, mtu
	if tune != nil {
		tune(srv)
		tune(cli)
	}
	l, err := Listen(ctx, "udp", "127.0.0.1:0", srv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ch := make(chan *Association, 1)
	go func() {
		a, _ := l.Accept(ctx)
		ch <- a
	}()
	client, err = Dial(ctx, "udp", l.Addr().String(), cli)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	server = <-ch
	if server == nil {
		b.Fatal("accept failed")
	}
	b.Cleanup(func() { server.Close() })
	return server, client
}

// rdmaWriteMover moves messages as RDMA Writes between two queue pairs in
// a DDP Stream Session, every 16th signaled, each batch followed by a
// zero-length Send whose arrival shows that the Writes before it are
// placed.
type rdmaWriteMover struct {
	src, dst *peer
	wr       rdmap.WriteWR
	recv     rdmap.RecvWR
	posted   int
	pending  int // signaled Writes not yet reaped
}

func newRDMAWriteMover(b *testing.B, mtu uint32, tune func(*Config)) *rdmaWriteMover {
	ctx := benchCtx(b)
	server, client := benchAssociations(b, mtu, tune)
	sa := server.Sessions(0)
	x, y := newPeer(b, nil), newPeer(b, nil)
	errc := make(chan error, 1)
	go func() {
		r, err := sa.Accept(ctx)
		if err == nil {
			_, err = r.Accept(y.QP, SessionConfig{})
		}
		errc <- err
	}()
	if _, err := Connect(ctx, client, 1, x.QP, SessionConfig{}); err != nil {
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return newRDMAWriteMoverOn(b, x, y)
}

// newRDMAWriteMoverOn moves RDMA Writes from x to y, whose queue pairs are
// in a session.
func newRDMAWriteMoverOn(b *testing.B, x, y *peer) *rdmaWriteMover {
	target := y.Reg(b, benchMessage, rdmap.RemoteWrite)
	src := x.Reg(b, benchMessage, 0)
	fillp(src.Bytes(), 5)
	m := &rdmaWriteMover{
		src:  x,
		dst:  y,
		wr:   rdmap.WriteWR{SGL: []rdmap.SGE{{MR: src, Length: benchMessage}}, RemoteSTag: target.STag()},
		recv: rdmap.RecvWR{SGL: []rdmap.SGE{{MR: y.Reg(b, 16, rdmap.LocalWrite), Length: 16}}},
	}
	if err := y.QP.PostRecv(m.recv); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if !bytes.Equal(target.Bytes(), src.Bytes()) {
			b.Error("the target's bytes differ from the source's")
		}
	})
	return m
}

// post posts one work request, reaping signaled completions while the
// send queue is full.
func (m *rdmaWriteMover) post(b *testing.B, post func() error) {
	for {
		err := post()
		if err == nil {
			return
		}
		if !errors.Is(err, rdmap.ErrSendQueue) || m.pending == 0 {
			b.Fatal(err)
		}
		m.reap(b)
	}
}

func (m *rdmaWriteMover) reap(b *testing.B) {
	if c := waitC(b, m.src.SCQ); c.Status != rdmap.StatusSuccess {
		b.Fatalf("write completion %+v", c)
	}
	m.pending--
}

func (m *rdmaWriteMover) move(b *testing.B, n int) {
	for range n {
		m.posted++
		m.wr.Unsignaled = m.posted%16 != 0
		m.post(b, func() error { return m.src.QP.PostWrite(m.wr) })
		if !m.wr.Unsignaled {
			m.pending++
		}
	}
	m.post(b, func() error { return m.src.QP.PostSend(rdmap.SendWR{Unsignaled: true}) })
	if c := waitC(b, m.dst.RCQ); c.Status != rdmap.StatusSuccess {
		b.Fatalf("receive completion %+v", c)
	}
	if err := m.dst.QP.PostRecv(m.recv); err != nil {
		b.Fatal(err)
	}
	for m.pending > 0 {
		m.reap(b)
	}
}

// rawMover moves 64 KiB messages with write and counts them as a reader
// goroutine receives them.
type rawMover struct {
	write func() error
	got   chan error // one nil per message received, or the read error
}

func (m *rawMover) move(b *testing.B, n int) {
	for range n {
		if err := m.write(); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		if err := <-m.got; err != nil {
			b.Fatal(err)
		}
	}
}

// reader prepares the goroutine that reads messages with read until it
// fails, reporting each on got, and returns the function that starts it.
// Its cleanup is registered now, before the connection's, so that it runs
// after them (cleanups run last first): the read fails and the reader
// ends.
func (m *rawMover) reader(b testing.TB) (start func(read func() error)) {
	m.got = make(chan error, benchBatch)
	stop := make(chan struct{})
	done := make(chan struct{})
	started := false
	b.Cleanup(func() {
		close(stop)
		if started {
			<-done
		}
	})
	return func(read func() error) {
		started = true
		go func() {
			defer close(done)
			for {
				err := read()
				select {
				case m.got <- err:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// newRawStreamMover sends raw 64 KiB SCTP messages on a Stream of an
// association made with this package's Config at mtu, through the
// Stream's flow control but without RFC 5043 framing.
func newRawStreamMover(b *testing.B, mtu uint32, tune func(*Config)) *rawMover {
	ctx := benchCtx(b)
	m := &rawMover{}
	start := m.reader(b)
	server, client := benchAssociations(b, mtu, tune)
	out, err := client.OpenStream(1)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, benchMessage)
	if err := out.writeRaw(ctx, msg); err != nil {
		b.Fatal(err)
	}
	in, err := server.AcceptStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMessage)
	if _, err := in.readRaw(buf); err != nil {
		b.Fatal(err)
	}
	start(func() error {
		_, err := in.readRaw(buf)
		return err
	})
	m.write = func() error { return out.writeRaw(ctx, msg) }
	return m
}

// newPionDefaultsMover sends 64 KiB messages over pion/dtls and pion/sctp
// as they come (MTU 1191, 1 MiB receive window, OS-default UDP buffers,
// ordered stream), the sender waiting while more than the peer's 1 MiB
// window is queued (pion queues without limit otherwise).
func newPionDefaultsMover(b *testing.B) *rawMover {
	ctx := benchCtx(b)
	sc, _ := mustCert(b)
	cc, _ := mustCert(b)
	l, err := dtls.ListenWithOptions("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)},
		dtls.WithCertificates(sc), dtls.WithInsecureSkipVerify(true))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	m := &rawMover{}
	start := m.reader(b)
	type res struct {
		a   *sctp.Association
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- res{nil, err}
			return
		}
		if err := c.(*dtls.Conn).HandshakeContext(ctx); err != nil {
			ch <- res{nil, err}
			return
		}
		a, err := sctp.ServerWithOptions(sctp.WithNetConn(c))
		ch <- res{a, err}
	}()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	conn, err := dtls.ClientWithOptions(pc, l.Addr(), dtls.WithCertificates(cc), dtls.WithInsecureSkipVerify(true))
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		b.Fatal(err)
	}
	client, err := sctp.ClientWithOptions(sctp.WithNetConn(conn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	r := <-ch
	if r.err != nil {
		b.Fatal(r.err)
	}
	server := r.a
	b.Cleanup(func() { server.Close() })

	out, err := client.OpenStream(1, sctp.PayloadProtocolIdentifier(wire.PPIDSegment))
	if err != nil {
		b.Fatal(err)
	}
	const window = 1 << 20
	low := make(chan struct{}, 1)
	out.SetBufferedAmountLowThreshold(window / 2)
	out.OnBufferedAmountLow(func() {
		select {
		case low <- struct{}{}:
		default:
		}
	})
	msg := make([]byte, benchMessage)
	// Open the stream on the server side first.
	if _, err := out.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(wire.PPIDSegment)); err != nil {
		b.Fatal(err)
	}
	in, err := server.AcceptStream()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMessage)
	if _, _, err := in.ReadSCTP(buf); err != nil {
		b.Fatal(err)
	}
	start(func() error {
		_, _, err := in.ReadSCTP(buf)
		return err
	})
	timer := time.NewTimer(recheckInterval)
	m.write = func() error {
		for out.BufferedAmount() > window {
			timer.Reset(recheckInterval)
			select {
			case <-low:
			case <-timer.C:
			}
		}
		_, err := out.WriteSCTP(msg, sctp.PayloadProtocolIdentifier(wire.PPIDSegment))
		return err
	}
	return m
}

func benchTuned(b *testing.B, mtu uint32, segments bool) {
	ctx := benchCtx(b)
	server, client := benchAssociations(b, mtu, nil)
	out, err := client.OpenStream(1)
	if err != nil {
		b.Fatal(err)
	}
	var msg []byte
	size := benchMessage
	write := func() error { return out.writeRaw(ctx, msg) }
	if segments {
		size = client.MULPDU()
		msg = taggedSegment(size - ddp.TaggedHeaderLen)
		write = func() error { _, err := out.WriteSegment(ctx, msg); return err }
	} else {
		msg = make([]byte, benchMessage)
	}
	if err := write(); err != nil {
		b.Fatal(err)
	}
	in, err := server.AcceptStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, benchMessage+wire.SSNLen)
	if _, err := in.readRaw(buf); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if _, err := in.readRaw(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		if err := write(); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// writeRaw sends msg as one SCTP message through the stream's flow
// control, bypassing the RFC 5043 checks (64 KiB is above any MULPDU).
func (s *Stream) writeRaw(ctx context.Context, msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.room.waitRoom(ctx, len(msg), false); err != nil {
		return err
	}
	return s.s.Write(context.Background(), msg, wire.PPIDSegment)
}

func (s *Stream) readRaw(buf []byte) (int, error) {
	n, _, err := s.s.Read(buf)
	return n, err
}
