package llp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// The target ring of the iwarp transports: Slots slots of Batch
// messages. The sender RDMA Writes a slot's messages, the last with
// Immediate Data naming the slot; the receiver checks the slot when the
// Immediate Data arrives (after every Write before it is placed) and
// gives the slot back with Immediate Data of its own. So up to
// Slots * Batch * MessageSize (8 MiB) is in flight.
const (
	Slots     = 4
	slotBytes = Batch * MessageSize
	ringBytes = Slots * slotBytes
	recvDepth = 2 * Slots
)

// IwarpSCTP is iwarp's sctp:// through the root package's Dial and
// Listen with a PSK and the MTU given (sctpddp.DefaultMTU, 1350, is what
// sctp:// uses unless told; sctpddp.LoopbackMTU, 8000, suits loopback):
// 64 KiB RDMA Writes from queue pair to queue pair.
func IwarpSCTP(mtu int) Transport {
	return Transport{
		Name: fmt.Sprintf("iwarp-sctp-%d", mtu), Network: "udp",
		About: fmt.Sprintf("iwarp sctp:// RDMA Write 64 KiB, PSK, MTU %d", mtu),
		Listen: func(ctx context.Context, addr string, sec *Security) (Listener, error) {
			return listenIwarp(ctx, "sctp://"+addr, iwarpConfig(sec, mtu))
		},
		Dial: func(ctx context.Context, addr string, sec *Security) (Sender, error) {
			return dialIwarp(ctx, "sctp://"+addr, iwarpConfig(sec, mtu))
		},
	}
}

// IwarpSCTPOnPion is IwarpSCTP with its associations on pion/sctp
// (sctpddp.Config.PionSCTP) instead of sctpddp's own: the two compared in
// one run.
func IwarpSCTPOnPion(mtu int) Transport {
	t := IwarpSCTP(mtu)
	t.Name += "-pion"
	t.About = fmt.Sprintf("iwarp sctp:// on pion/sctp, RDMA Write 64 KiB, PSK, MTU %d", mtu)
	cfg := func(sec *Security) *iwarp.Config {
		c := iwarpConfig(sec, mtu)
		c.SCTP.PionSCTP = true
		return c
	}
	t.Listen = func(ctx context.Context, addr string, sec *Security) (Listener, error) {
		return listenIwarp(ctx, "sctp://"+addr, cfg(sec))
	}
	t.Dial = func(ctx context.Context, addr string, sec *Security) (Sender, error) {
		return dialIwarp(ctx, "sctp://"+addr, cfg(sec))
	}
	return t
}

// IwarpSCTPCert is IwarpSCTP authenticated with pinned certificates
// instead of a PSK, as WebRTC does (both ends present Security's ECDSA
// certificate and pin its fingerprint): pion/dtls then negotiates
// ECDHE-ECDSA with AES-128-GCM, where sctpddp's PSK suites put
// AES-128-CBC with HMAC-SHA256 first.
func IwarpSCTPCert(mtu int) Transport {
	t := IwarpSCTP(mtu)
	t.Name += "-cert"
	t.About = fmt.Sprintf("iwarp sctp:// RDMA Write 64 KiB, pinned certificates (AES-GCM), MTU %d", mtu)
	cfg := func(sec *Security) (*iwarp.Config, error) {
		fp, err := sctpddp.CertificateFingerprint(sec.Cert)
		if err != nil {
			return nil, err
		}
		return &iwarp.Config{SCTP: &sctpddp.Config{Certificate: &sec.Cert, PeerFingerprints: []sctpddp.Fingerprint{fp}, MTU: uint32(mtu)}}, nil
	}
	t.Listen = func(ctx context.Context, addr string, sec *Security) (Listener, error) {
		c, err := cfg(sec)
		if err != nil {
			return nil, err
		}
		return listenIwarp(ctx, "sctp://"+addr, c)
	}
	t.Dial = func(ctx context.Context, addr string, sec *Security) (Sender, error) {
		c, err := cfg(sec)
		if err != nil {
			return nil, err
		}
		return dialIwarp(ctx, "sctp://"+addr, c)
	}
	return t
}

// IwarpTCP is iwarp's tcp:// (MPA over TCP, mpa's defaults: CRC32c, no
// Markers): 64 KiB RDMA Writes.
func IwarpTCP() Transport {
	return Transport{
		Name: "iwarp-tcp", Network: "tcp", About: "iwarp tcp:// RDMA Write 64 KiB, MPA defaults",
		Listen: func(ctx context.Context, addr string, _ *Security) (Listener, error) {
			return listenIwarp(ctx, "tcp://"+addr, &iwarp.Config{})
		},
		Dial: func(ctx context.Context, addr string, _ *Security) (Sender, error) {
			return dialIwarp(ctx, "tcp://"+addr, &iwarp.Config{})
		},
	}
}

func iwarpConfig(sec *Security, mtu int) *iwarp.Config {
	return &iwarp.Config{SCTP: &sctpddp.Config{PSK: sec.PSK, PSKIdentity: []byte("llpbench"), MTU: uint32(mtu)}}
}

// errFlushed is a receive flushed because the stream ended.
var errFlushed = errors.New("llp: the stream ended")

// iwarpEnd is one side's verbs objects.
type iwarpEnd struct {
	pd         *rdmap.ProtectionDomain
	qp         *rdmap.QueuePair
	scq, rcq   *rdmap.CompletionQueue
	ring       *rdmap.MemoryRegion
	recv       [recvDepth]rdmap.RecvWR
	conn       *iwarp.Conn
	completion []rdmap.Completion
}

func newIwarpEnd(ringAccess rdmap.Access) (*iwarpEnd, error) {
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	e := &iwarpEnd{pd: dev.NewProtectionDomain(), completion: make([]rdmap.Completion, 64)}
	e.scq = dev.NewCompletionQueue(4 * Slots * Batch)
	e.rcq = dev.NewCompletionQueue(4 * recvDepth)
	qp, err := e.pd.NewQueuePair(rdmap.QPConfig{SendCQ: e.scq, RecvCQ: e.rcq, SendDepth: 2 * Slots * Batch, RecvDepth: recvDepth})
	if err != nil {
		return nil, err
	}
	e.qp = qp
	if e.ring, err = e.pd.RegisterMemory(make([]byte, ringBytes), 0, ringAccess); err != nil {
		return nil, err
	}
	small, err := e.pd.RegisterMemory(make([]byte, 8*recvDepth), 0, rdmap.LocalWrite)
	if err != nil {
		return nil, err
	}
	for i := range e.recv {
		e.recv[i] = rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: small, Offset: uint64(8 * i), Length: 8}}}
	}
	return e, nil
}

// postRecvs posts the receive buffers that Immediate Data lands in, 8
// octets each. Each has octets of its own: a message is placed when it
// arrives and its completion reads them when it is delivered, in order,
// so a later Immediate Data that arrives first must not overwrite an
// earlier one's.
func (e *iwarpEnd) postRecvs() error {
	for i := range e.recv {
		if err := e.qp.PostRecv(e.recv[i]); err != nil {
			return err
		}
	}
	return nil
}

// nextImm waits for the next Immediate Data and posts its buffer again.
func (e *iwarpEnd) nextImm(ctx context.Context) (uint64, error) {
	c, err := e.rcq.Wait(ctx)
	if err != nil {
		return 0, err
	}
	if c.Status == rdmap.StatusWRFlushErr {
		return 0, errFlushed
	}
	if c.Status != rdmap.StatusSuccess {
		return 0, fmt.Errorf("llp: receive completion %v: %v", c.Status, c.Err)
	}
	if c.Op != rdmap.WorkRecvWithImm {
		return 0, fmt.Errorf("llp: a %v completion, want Immediate Data", c.Op)
	}
	return c.Imm, e.qp.PostRecv(e.recv[c.WRID])
}

// reap takes the send completions there are; with wait, it waits for one
// first.
func (e *iwarpEnd) reap(ctx context.Context, wait bool, done func(rdmap.Completion)) error {
	if wait {
		c, err := e.scq.Wait(ctx)
		if err != nil {
			return err
		}
		if c.Status != rdmap.StatusSuccess {
			return fmt.Errorf("llp: send completion %v: %v", c.Status, c.Err)
		}
		done(c)
	}
	for {
		n := e.scq.Poll(e.completion)
		for _, c := range e.completion[:n] {
			if c.Status != rdmap.StatusSuccess {
				return fmt.Errorf("llp: send completion %v: %v", c.Status, c.Err)
			}
			done(c)
		}
		if n < len(e.completion) {
			return nil
		}
	}
}

// post posts a work request, reaping completions while the send queue
// is full.
func (e *iwarpEnd) post(ctx context.Context, post func() error, done func(rdmap.Completion)) error {
	for {
		err := post()
		if !errors.Is(err, rdmap.ErrSendQueue) {
			return err
		}
		if err := e.reap(ctx, true, done); err != nil {
			return err
		}
	}
}

type iwarpListener struct {
	l *iwarp.Listener
}

func listenIwarp(ctx context.Context, url string, cfg *iwarp.Config) (Listener, error) {
	l, err := iwarp.Listen(ctx, url, cfg)
	if err != nil {
		return nil, err
	}
	return &iwarpListener{l: l}, nil
}

func (l *iwarpListener) Addr() net.Addr { return l.l.Addr() }
func (l *iwarpListener) Close() error   { return l.l.Close() }

func (l *iwarpListener) Accept(ctx context.Context) (Receiver, error) {
	req, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	e, err := newIwarpEnd(rdmap.LocalWrite | rdmap.RemoteWrite)
	if err != nil {
		req.Reject(nil)
		return nil, err
	}
	if err := e.postRecvs(); err != nil {
		req.Reject(nil)
		return nil, err
	}
	if e.conn, err = req.Accept(ctx, e.qp, e.ring.Remote().Append(nil)); err != nil {
		return nil, err
	}
	return &iwarpReceiver{e: e}, nil
}

type iwarpReceiver struct{ e *iwarpEnd }

// Receive checks each slot the sender names, in the order named, and
// gives it back.
func (r *iwarpReceiver) Receive(c *Counter) error {
	e := r.e
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var off int64
	for {
		imm, err := e.nextImm(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errFlushed) {
				return nil // the connection ended
			}
			return err
		}
		slot, n := int(imm>>32), int(uint32(imm))
		if slot >= Slots || n < 1 || n > Batch {
			err := fmt.Errorf("llp: Immediate Data %#x names no slot", imm)
			c.Fail(err)
			return err
		}
		b := e.ring.Bytes()[slot*slotBytes : slot*slotBytes+n*MessageSize]
		if err := Check(b, off); err != nil {
			c.Fail(err)
			return err
		}
		off += int64(len(b))
		c.Add(len(b))
		credit := rdmap.SendWR{WithImm: true, Imm: uint64(slot)}
		if err := e.post(ctx, func() error { return e.qp.PostSend(credit) }, func(rdmap.Completion) {}); err != nil {
			return err
		}
		if err := e.reap(ctx, false, func(rdmap.Completion) {}); err != nil {
			return err
		}
	}
}

func (r *iwarpReceiver) Close() error { return r.e.close() }

// iwarpSender Writes each Send's messages into the next slot of the
// peer's ring, once the peer has given that slot back and the local
// completion of the slot's last Write shows that the source slot may be
// filled again.
type iwarpSender struct {
	e      *iwarpEnd
	remote rdmap.RemoteBuffer
	next   int           // the next slot
	free   [Slots]bool   // slots the peer has given back (or never had)
	wrid   [Slots]uint64 // the WR ID of each slot's last Write, 0 once complete
	seq    uint64
	sent   int64
}

func dialIwarp(ctx context.Context, url string, cfg *iwarp.Config) (Sender, error) {
	e, err := newIwarpEnd(rdmap.LocalWrite)
	if err != nil {
		return nil, err
	}
	if err := e.postRecvs(); err != nil {
		return nil, err
	}
	if e.conn, err = iwarp.Dial(ctx, url, e.qp, cfg); err != nil {
		return nil, err
	}
	remote, _, err := rdmap.ParseRemoteBuffer(e.conn.PeerPrivateData())
	if err != nil || remote.Len < ringBytes {
		e.conn.Close()
		return nil, fmt.Errorf("llp: the peer's ring %v: %v", remote, err)
	}
	s := &iwarpSender{e: e, remote: remote}
	for i := range s.free {
		s.free[i] = true
	}
	return s, nil
}

func (s *iwarpSender) completed(c rdmap.Completion) {
	for i, id := range s.wrid {
		if id != 0 && id <= c.WRID {
			s.wrid[i] = 0
		}
	}
}

func (s *iwarpSender) Send(ctx context.Context, n int) error {
	if n < 1 || n > Batch {
		return fmt.Errorf("llp: a Send of %d messages", n)
	}
	e := s.e
	slot := s.next
	for !s.free[slot] {
		imm, err := e.nextImm(ctx)
		if err != nil {
			return err
		}
		if imm >= Slots {
			return fmt.Errorf("llp: the peer gave back slot %d", imm)
		}
		s.free[imm] = true
	}
	for s.wrid[slot] != 0 {
		if err := e.reap(ctx, true, s.completed); err != nil {
			return err
		}
	}
	base := uint64(slot * slotBytes)
	src := e.ring.Bytes()[base : base+uint64(n*MessageSize)]
	Fill(src, s.sent)
	for i := range n {
		s.seq++
		off := base + uint64(i*MessageSize)
		wr := rdmap.WriteWR{
			ID:         s.seq,
			SGL:        []rdmap.SGE{{MR: e.ring, Offset: off, Length: MessageSize}},
			RemoteSTag: s.remote.STag,
			RemoteTO:   s.remote.TO + off,
			Unsignaled: i < n-1,
		}
		if i == n-1 {
			wr.WithImm, wr.Imm = true, uint64(slot)<<32|uint64(n)
			s.wrid[slot] = s.seq
		}
		if err := e.post(ctx, func() error { return e.qp.PostWrite(wr) }, s.completed); err != nil {
			return err
		}
	}
	s.free[slot] = false
	s.next = (slot + 1) % Slots
	s.sent += int64(n * MessageSize)
	return e.reap(ctx, false, s.completed)
}

func (s *iwarpSender) Sent() int64  { return s.sent }
func (s *iwarpSender) Close() error { return s.e.close() }

// closeTimeout bounds the orderly close of a connection whose path
// loses what it sends.
const closeTimeout = 5 * time.Second

func (e *iwarpEnd) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return e.conn.Shutdown(ctx)
}
