package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// perfServe is "iwarp perf --listen": it answers perf clients until ctx
// is done, with a plain TCP or SCTP listener beside for --compare-raw.
func perfServe(ctx context.Context, ep endpoint, o *perfOptions, stdout, stderr io.Writer) error {
	l, rec, err := listenRecorded(ctx, ep, &o.link, stderr)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	rawPort, closeRaw, err := startRawServer(ctx, ep, l, &wg)
	if err != nil {
		l.Close()
		rec.Close()
		return fmt.Errorf("raw listener for --compare-raw: %v", err)
	}
	fmt.Fprintf(stdout, "listening on %s://%s\n", ep.scheme, l.Addr())
	if l.fingerprint != "" {
		fmt.Fprintf(stdout, "fingerprint sha-256 %s\n", l.fingerprint)
	}
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	for {
		p, err := l.Accept(ctx)
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := perfServeConn(ctx, dev, p, rawPort); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "iwarp perf: client %s: %v\n", p.peer, err)
			}
		}()
	}
	l.Close()
	closeRaw()
	wg.Wait()
	return rec.Close()
}

// perfServeConn answers one perf client.
func perfServeConn(ctx context.Context, dev *rdmap.Device, p *pending, rawPort uint16) error {
	pd := dev.NewProtectionDomain()
	// The server waits only for receives; its send completions (control
	// replies, errors) are taken on the way. On a CQ of their own the
	// waiting goroutine reads the connection itself (CompletionQueue.Wait).
	scq, rcq := dev.NewCompletionQueue(8192), dev.NewCompletionQueue(8192)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq, IRD: perfReadDepth, ORD: perfReadDepth, SendDepth: 512, RecvDepth: 1024})
	if err != nil {
		p.reject()
		return err
	}
	hello, err := newRecvBuffers(pd, qp, 1, ctlLen, 0)
	if err != nil {
		p.reject()
		return err
	}
	defer hello.close()
	c, err := p.accept(qp)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		qp.Close(closeCtx)
		cancel()
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.close(closeCtx)
		cancel()
	}()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-qp.Terminated():
			cancel()
		case <-cctx.Done():
		}
	}()
	ctl, err := pd.RegisterMemory(make([]byte, ctlLen), 0, 0)
	if err != nil {
		return err
	}
	defer ctl.Deregister()

	var bufs *recvBuffers
	var data, echo *rdmap.MemoryRegion
	var clientSTag uint32
	var clientTO uint64
	var mode perfCtl // the current test
	var count uint32 // data Sends received in the current test
	credit := uint32(1)
	var ctlID uint64 = 1 << 62
	reply := func(c perfCtl) error {
		ctlID++
		return sendCtl(qp, ctl, ctlID, c)
	}
	for {
		cp, err := waitEither(cctx, scq, rcq)
		if err != nil {
			if ctx.Err() != nil || qp.Err() != nil {
				return nil // the client is gone, or we stop
			}
			return err
		}
		if cp.Status != rdmap.StatusSuccess {
			if qp.Err() != nil {
				return nil
			}
			return fmt.Errorf("%v completion: %v %v", cp.Op, cp.Status, cp.Err)
		}
		if cp.Op != rdmap.WorkRecv {
			continue
		}
		var msg []byte
		var repost func() error
		if bufs == nil {
			msg, repost = hello.take(cp)
			repost = func() error { return nil }
		} else {
			msg, repost = bufs.take(cp)
		}
		m, isCtl := parseCtl(msg)
		if !isCtl {
			if err := repost(); err != nil {
				return err
			}
			if err := perfAnswerData(qp, &mode, &count, credit, len(msg), data, echo, clientSTag, clientTO, reply); err != nil {
				return err
			}
			continue
		}
		switch m.typ {
		case ctlHello:
			if bufs != nil || m.size == 0 || m.size > maxPerfSize || m.n == 0 || m.n > 1024 {
				return errors.New("bad hello")
			}
			size := int(m.size)
			if data, err = pd.RegisterMemory(make([]byte, size), 0, rdmap.RemoteRead|rdmap.RemoteWrite|rdmap.LocalWrite); err != nil {
				return err
			}
			defer data.Deregister()
			fillPattern(data.Bytes())
			if echo, err = pd.RegisterMemory(make([]byte, size), 0, 0); err != nil {
				return err
			}
			defer echo.Deregister()
			fillPattern(echo.Bytes())
			clientSTag, clientTO = m.stag, m.to
			credit = max(1, m.n/4)
			if bufs, err = newRecvBuffers(pd, qp, int(m.n), max(ctlLen, size), 1<<32); err != nil {
				return err
			}
			defer bufs.close()
			if err := reply(perfCtl{typ: ctlAdvert, stag: data.STag(), to: 0, size: m.size, n: credit, port: rawPort}); err != nil {
				return err
			}
			continue
		case ctlStart:
			mode, count = m, 0
		case ctlDone:
		default:
			return fmt.Errorf("unexpected control message %d", m.typ)
		}
		if err := repost(); err != nil {
			return err
		}
		if err := reply(perfCtl{typ: ctlAck}); err != nil {
			return err
		}
	}
}

// perfAnswerData handles a data Send: it returns credits (bandwidth),
// echoes it (Send latency) or writes back (Write latency).
func perfAnswerData(qp *rdmap.QueuePair, mode *perfCtl, count *uint32, credit uint32, n int, data, echo *rdmap.MemoryRegion, stag uint32, to uint64, reply func(perfCtl) error) error {
	if data == nil {
		return errors.New("data before hello")
	}
	*count++
	switch {
	case mode.op == opCodes["send"] && mode.lat == 0:
		if *count%credit == 0 {
			return reply(perfCtl{typ: ctlCredit, n: credit})
		}
	case mode.op == opCodes["send"]:
		return qp.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: echo, Length: uint32(n)}}, Unsignaled: true})
	case mode.op == opCodes["write"] && mode.lat == 1:
		if mode.size > uint32(echo.Len()) {
			return errors.New("write larger than the hello said")
		}
		if err := qp.PostWrite(rdmap.WriteWR{ID: 3, SGL: []rdmap.SGE{{MR: echo, Length: mode.size}}, RemoteSTag: stag, RemoteTO: to, Unsignaled: true}); err != nil {
			return err
		}
		return qp.PostSend(rdmap.SendWR{ID: 4, Unsignaled: true})
	}
	return nil
}

// startRawServer listens for --compare-raw on a free port of the perf
// listener's host: plain TCP for tcp://, a DTLS/SCTP association with the
// listener's configuration for sctp://.
func startRawServer(ctx context.Context, ep endpoint, l *listener, wg *sync.WaitGroup) (uint16, func(), error) {
	host, _, _ := net.SplitHostPort(l.Addr().String())
	addr := net.JoinHostPort(host, "0")
	if ep.scheme == "tcp" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, nil, err
		}
		actx, cancel := context.WithCancel(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cw sync.WaitGroup
			defer cw.Wait()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				cw.Add(1)
				go func() {
					defer cw.Done()
					// A transfer under way ends when the server stops.
					stop := context.AfterFunc(actx, func() { c.Close() })
					defer stop()
					defer c.Close()
					rawServeTCP(c)
				}()
			}
		}()
		return uint16(ln.Addr().(*net.TCPAddr).Port), func() { cancel(); ln.Close() }, nil
	}
	cfg := *l.sctpConfig
	cfg.Trace = nil
	sl, err := sctpddp.Listen(ctx, "udp", addr, &cfg)
	if err != nil {
		return 0, nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cw sync.WaitGroup
		defer cw.Wait()
		for {
			a, err := sl.Accept(actx)
			if err != nil {
				return
			}
			cw.Add(1)
			go func() {
				defer cw.Done()
				rawServeSCTP(actx, a)
				// Deliver the last answer before closing.
				sctx, cancel := context.WithTimeout(actx, time.Second)
				a.Shutdown(sctx)
				cancel()
				a.Close()
			}()
		}
	}()
	port := uint16(sl.Addr().(*net.UDPAddr).Port)
	return port, func() { cancel(); sl.Close() }, nil
}

// The raw transfer's header: mode (rawToServer...), CRC32c on (1),
// message size, count.
const rawHeaderLen = 10

// The raw transfer's modes: a stream one way (bandwidth), or count round
// trips (latency).
const (
	rawToServer = 0 // count messages of size bytes, client to server
	rawToClient = 1 // the same, server to client
	rawEcho     = 2 // the client sends size bytes, the server sends them back
	rawRequest  = 3 // the client sends rawRequestLen bytes, the server answers size bytes
)

// rawRequestLen is a latency request's size: as an RDMA Read Request's
// RDMAP fields.
const rawRequestLen = 28

func putRawHeader(b []byte, mode uint8, crc bool, size, count int) {
	b[0], b[1] = mode, 0
	if crc {
		b[1] = 1
	}
	binary.BigEndian.PutUint32(b[2:], uint32(size))
	binary.BigEndian.PutUint32(b[6:], uint32(count))
}

// rawServeTCP answers one --compare-raw transfer over plain TCP.
func rawServeTCP(c net.Conn) {
	var h [rawHeaderLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return
	}
	mode, crc := h[0], h[1] == 1
	size, count := int(binary.BigEndian.Uint32(h[2:])), int(binary.BigEndian.Uint32(h[6:]))
	if size <= 0 || size > maxPerfSize {
		return
	}
	switch mode {
	case rawToClient:
		rawSendTCP(c, size, count, crc)
		io.ReadFull(c, h[:1])
	case rawToServer:
		if rawRecvTCP(c, size, count, crc) == nil {
			c.Write([]byte{1})
		}
	case rawEcho, rawRequest:
		in, out := newRawMsg(size, crc), newRawMsg(size, crc)
		if mode == rawRequest {
			in = newRawMsg(rawRequestLen, crc)
		}
		for range count {
			if in.read(c) != nil || out.write(c) != nil {
				return
			}
		}
	}
}

// rawMsg is one message of a raw round trip over TCP: size bytes and,
// with crc, their CRC32c after them, computed on every send and checked
// on every receipt, as MPA does per FPDU.
type rawMsg struct {
	buf  []byte
	size int
	crc  bool
}

func newRawMsg(size int, crc bool) *rawMsg {
	m := &rawMsg{buf: make([]byte, size+4), size: size, crc: crc}
	fillPattern(m.buf[:size])
	if !crc {
		m.buf = m.buf[:size]
	}
	return m
}

func (m *rawMsg) write(c net.Conn) error {
	if m.crc {
		mpa.PutCRC(m.buf[m.size:], mpa.CRC(m.buf[:m.size]))
	}
	_, err := c.Write(m.buf)
	return err
}

func (m *rawMsg) read(c net.Conn) error {
	if _, err := io.ReadFull(c, m.buf); err != nil {
		return err
	}
	if m.crc && mpa.CRC(m.buf[:m.size]) != mpa.WireCRC(m.buf[m.size:]) {
		return errors.New("raw TCP: CRC32c mismatch")
	}
	return nil
}

// rawSendTCP writes count messages of size bytes, each followed by its
// CRC32c when crc is set, as MPA computes one per FPDU.
func rawSendTCP(c net.Conn, size, count int, crc bool) error {
	m := newRawMsg(size, crc)
	for range count {
		if err := m.write(c); err != nil {
			return err
		}
	}
	return nil
}

// rawRecvTCP reads what rawSendTCP wrote, checking the CRCs.
func rawRecvTCP(c net.Conn, size, count int, crc bool) error {
	m := newRawMsg(size, crc)
	for range count {
		if err := m.read(c); err != nil {
			return err
		}
	}
	return nil
}

// rawServeSCTP answers one --compare-raw transfer over an SCTP stream.
func rawServeSCTP(ctx context.Context, a *sctpddp.Association) {
	s, err := a.AcceptStream(ctx)
	if err != nil {
		return
	}
	buf := make([]byte, 64<<10+16)
	n, _, err := s.ReadMessage(ctx, buf)
	if err != nil || n != rawSCTPOverhead+rawHeaderLen {
		return
	}
	h := buf[rawSCTPOverhead:]
	mode := h[0]
	size, count := int(binary.BigEndian.Uint32(h[2:])), int(binary.BigEndian.Uint32(h[6:]))
	if size <= 0 || size > maxPerfSize {
		return
	}
	switch mode {
	case rawToClient:
		rawSendSCTP(ctx, s, patterned(size), count)
		s.ReadMessage(ctx, buf)
	case rawToServer:
		if rawRecvSCTP(ctx, s, size, count, buf) == nil {
			rawWriteSCTP(ctx, s, []byte{1})
		}
	case rawEcho, rawRequest:
		in, out := size, patterned(size)
		if mode == rawRequest {
			in = rawRequestLen
		}
		for range count {
			if rawRecvSCTP(ctx, s, in, 1, buf) != nil || rawSendSCTP(ctx, s, out, 1) != nil {
				return
			}
		}
	}
}

// The messages of a raw SCTP transfer go through sctpddp.Stream, which
// frames every message as a DDP Segment Chunk: each carries a DDP-SSN and
// a tagged DDP header that nothing interprets, and the rest is payload.
const rawSCTPOverhead = sctpddp.SSNLen + ddp.TaggedHeaderLen

var rawSCTPHeader = func() []byte {
	h := ddp.Header{Tagged: true, Last: true, DV: ddp.Version}
	return h.Append(nil)
}()

func rawWriteSCTP(ctx context.Context, s *sctpddp.Stream, b []byte) error {
	_, err := s.WriteSegmentv(ctx, rawSCTPHeader, [][]byte{b})
	return err
}

// rawSendSCTP sends msg count times, each in SCTP messages as large as
// DDP Segments may be (the MULPDU).
func rawSendSCTP(ctx context.Context, s *sctpddp.Stream, msg []byte, count int) error {
	chunk := s.MULPDU() - ddp.TaggedHeaderLen
	for range count {
		for off := 0; off < len(msg); off += chunk {
			if err := rawWriteSCTP(ctx, s, msg[off:min(off+chunk, len(msg))]); err != nil {
				return err
			}
		}
	}
	return nil
}

// patterned returns size bytes filled as the perf regions are.
func patterned(size int) []byte {
	b := make([]byte, size)
	fillPattern(b)
	return b
}

func rawRecvSCTP(ctx context.Context, s *sctpddp.Stream, size, count int, buf []byte) error {
	want := size * count
	for got := 0; got < want; {
		n, _, err := s.ReadMessage(ctx, buf)
		if err != nil {
			return err
		}
		got += n - rawSCTPOverhead
	}
	return nil
}
