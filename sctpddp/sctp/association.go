package sctp

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// Config configures an Association. The zero value of each optional field
// is its default.
type Config struct {
	// Handshake is what the INIT or INIT ACK announces. Ports default to
	// 5000, the port pion/sctp uses; ARwnd to ReceiveBufferSize; the
	// stream counts to 64.
	Handshake HandshakeConfig
	// Keys authenticate the State Cookie on the passive side (Server); a
	// fresh pair is drawn when nil.
	Keys *CookieKeys

	// RTOInitial, RTOMin and RTOMax are §6.3.1's; defaults
	// DefaultRTOInitial, DefaultRTOMin, DefaultRTOMax.
	RTOInitial, RTOMin, RTOMax time.Duration
	// MaxRetrans is Association.Max.Retrans (§8.1); default 10.
	MaxRetrans int
	// MaxInitRetransmits is Max.Init.Retransmits (§5.1.6, §16); default 8.
	MaxInitRetransmits int
	// HandshakeTimeout bounds Client and Server; default 30 s.
	HandshakeTimeout time.Duration
	// HeartbeatInterval is HB.interval (§8.3); default 30 s, negative
	// disables HEARTBEATs.
	HeartbeatInterval time.Duration
	// DeadPeerTimeout bounds the time the peer may stay silent while data
	// or a HEARTBEAT is outstanding before the association fails with
	// ErrDeadPeer, whatever the error counter says; default 30 s.
	DeadPeerTimeout time.Duration
	// MTU is the largest SCTP packet sent (the DTLS or UDP payload);
	// default 1200.
	MTU int
	// SendBufferSize bounds the bytes of user messages queued and
	// unacknowledged; SendMessage blocks beyond SendWindow, which is
	// twice the congestion window or flight size, at least
	// min(256 KiB, SendBufferSize), at most SendBufferSize. Default 1 MiB.
	SendBufferSize int
	// ReceiveBufferSize bounds the receive window (RecvDefaultBufferSize
	// if 0); ReceiveWindow is the window advertised first
	// (ReceiveBufferSize if 0 or larger). The window doubles, up to
	// ReceiveBufferSize, whenever the streams' readers take half of it
	// within two round trips (a sender the window holds back, as
	// quic-go's flow control auto-tuning has it), and returns to
	// ReceiveWindow once nothing has been read for a second and eight
	// round trips.
	ReceiveBufferSize uint32
	ReceiveWindow     uint32
	// SACKDelay is the delayed acknowledgement timeout
	// (RecvDefaultSACKDelay if 0).
	SACKDelay time.Duration
	// OnMessage, when set, receives every user message on the
	// association's goroutine; m.Data is valid until it returns, and for
	// an unfragmented message it is the received packet itself. It must
	// not block. Without it, messages are copied and queued for
	// ReadMessage.
	OnMessage func(m RecvMessage)
	// Batcher, when set, is corked before the packets the run loop
	// sends on one wake-up and flushed after the last of them, so that
	// the layer beneath the connection can send them together.
	Batcher Batcher
}

// Batcher is the optional layer beneath an association's connection that
// holds the packets written between Cork and Flush and sends them
// together (a batching UDP socket beneath DTLS). A Flush error is
// packets lost, which retransmission repairs.
type Batcher interface {
	Cork()
	Flush() error
}

// Errors of an Association.
var (
	// ErrClosed: the association was closed by Close, or shut down by the
	// peer.
	ErrClosed = errors.New("sctp: association closed")
	// ErrDeadPeer: the peer is unreachable (§8.1): the error counter
	// exceeded Association.Max.Retrans, or it was silent for longer than
	// Config.DeadPeerTimeout.
	ErrDeadPeer = errors.New("sctp: peer unreachable")
	// ErrHandshakeTimeout: the handshake did not complete.
	ErrHandshakeTimeout = errors.New("sctp: handshake timed out")
	// ErrWouldBlock: TrySendMessage found the send buffer full.
	ErrWouldBlock = errors.New("sctp: send buffer full")
	// ErrMessageTooLarge: the message does not fit the send buffer.
	ErrMessageTooLarge = errors.New("sctp: message larger than the send buffer")
	// ErrInvalidStream: the Stream Identifier is not below the outbound
	// stream count.
	ErrInvalidStream = errors.New("sctp: invalid stream identifier")
)

// AbortError is the end of an association by an ABORT chunk, sent
// (Remote false) or received (Remote true), with its first error cause.
type AbortError struct {
	Remote bool
	Cause  chunk.CauseCode // 0 when the ABORT held none
	Info   []byte
}

func (e *AbortError) Error() string {
	who := "local"
	if e.Remote {
		who = "peer's"
	}
	if e.Cause == 0 {
		return "sctp: " + who + " ABORT"
	}
	return fmt.Sprintf("sctp: %s ABORT: %v", who, e.Cause)
}

// assocState is the association's state (RFC 9260 §4).
type assocState uint8

const (
	stateClosed assocState = iota
	stateCookieWait
	stateCookieEchoed
	stateEstablished
	stateShutdownPending
	stateShutdownSent
	stateShutdownReceived
	stateShutdownAckSent
)

// The reader's buffers: enough for the reader to run ahead of the loop
// by a few packets, each as large as any SCTP packet over UDP.
const (
	assocReadBuffers = 4
	assocReadBufSize = 1 << 16
)

// outMsg is a user message handed to SendMessage: its bytes, gathered
// into one buffer, and the fragments the Sender has yet to release.
type outMsg struct {
	buf       []byte
	streamID  uint16
	ppid      uint32
	unordered bool
	left      int // fragments not yet released
}

var outMsgPool = sync.Pool{New: func() any { return new(outMsg) }}

// inMsg is a received message queued in its Stream for ReadMessage.
type inMsg struct {
	buf       []byte
	streamID  uint16
	ppid      uint32
	unordered bool
}

var inMsgPool = sync.Pool{New: func() any { return new(inMsg) }}

// Association is an SCTP association (RFC 9260) over a packet transport:
// one Read of the net.Conn returns one SCTP packet and one Write sends
// one. One goroutine, the run loop, owns its state, its timer and its
// sending; a second reads packets. Its methods are safe for concurrent
// use.
type Association struct {
	conn net.Conn
	cfg  Config

	// Owned by the run loop.
	state     assocState
	est       Established
	snd       *Sender
	rcv       *Receiver
	keys      CookieKeys
	hsCfg     HandshakeConfig
	cw        *CookieWait
	ce        *CookieEchoed
	t1        time.Time // T1-init / T1-cookie deadline
	t1RTO     time.Duration
	t1Count   int
	t2        time.Time // T2-shutdown deadline
	t2Count   int
	hsStart   time.Time
	hbNext    time.Time
	hbSent    time.Time // when the outstanding HEARTBEAT was sent; zero if none
	hbNonce   uint64
	lastRecv  time.Time
	pmdcs     int
	fragSize  int
	ssn       []uint16
	cur       *outMsg // message being queued into the Sender
	curOff    int
	wbuf      []byte
	ctl       []byte // control chunks waiting for the next packet
	tagTie    AssociationTags
	timer     *time.Timer
	released  []ReleasedChunk
	acked     []*Stream // streams whose OnAcked is due
	closeWait bool      // Close asked for a SHUTDOWN

	// Receive window auto-tuning (tuneWindow): the epoch's start and the
	// bytes of new DATA since, and when DATA last came.
	rwEpoch  time.Time
	rwBytes  uint64
	lastData time.Time

	in       chan []byte
	free     chan []byte
	readErr  chan error // the reader's last word, after its packets
	wake     chan struct{}
	closeReq chan struct{}
	abortReq chan struct{}
	done     chan struct{}
	estab    chan struct{}
	readerWG sync.WaitGroup

	// mu guards the fields below: the queue between the users and the
	// run loop.
	mu          sync.Mutex
	pending     fifo[*outMsg]
	queuedBytes int    // bytes of messages in pending or in the Sender
	rwnd        uint32 // the receive window, for ReceiveWindow
	sendWindow  int    // what queuedBytes may reach: SendWindow
	space       chan struct{}
	streams     map[uint16]*Stream
	accepts     []*Stream // streams the peer started, for AcceptStream
	acceptReady chan struct{}
	ulpRelease  int
	hbWanted    bool // Heartbeat was called
	err         error
	closing     bool
	closeOnce   sync.Once
	abortOnce   sync.Once
}

// Client runs the active side of the handshake on conn and returns the
// association once ESTABLISHED.
func Client(conn net.Conn, cfg Config) (*Association, error) {
	return start(conn, cfg, true)
}

// Server waits for a peer's INIT on conn, answers the handshake and
// returns the association once ESTABLISHED.
func Server(conn net.Conn, cfg Config) (*Association, error) {
	return start(conn, cfg, false)
}

func start(conn net.Conn, cfg Config, active bool) (*Association, error) {
	if cfg.RTOInitial == 0 {
		cfg.RTOInitial = DefaultRTOInitial
	}
	if cfg.RTOMin == 0 {
		cfg.RTOMin = DefaultRTOMin
	}
	if cfg.RTOMax == 0 {
		cfg.RTOMax = DefaultRTOMax
	}
	if cfg.MaxRetrans == 0 {
		cfg.MaxRetrans = 10
	}
	if cfg.MaxInitRetransmits == 0 {
		cfg.MaxInitRetransmits = 8
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 30 * time.Second
	}
	if cfg.DeadPeerTimeout == 0 {
		cfg.DeadPeerTimeout = 30 * time.Second
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1200
	}
	if cfg.MTU < 256 || cfg.MTU > assocReadBufSize {
		return nil, fmt.Errorf("sctp: Config.MTU %d outside [256, %d]", cfg.MTU, assocReadBufSize)
	}
	if cfg.SendBufferSize == 0 {
		cfg.SendBufferSize = 1 << 20
	}
	if cfg.ReceiveBufferSize == 0 {
		cfg.ReceiveBufferSize = RecvDefaultBufferSize
	}
	if cfg.ReceiveWindow == 0 || cfg.ReceiveWindow > cfg.ReceiveBufferSize {
		cfg.ReceiveWindow = cfg.ReceiveBufferSize
	}
	h := cfg.Handshake
	if h.LocalPort == 0 {
		h.LocalPort = 5000
	}
	if h.PeerPort == 0 && active {
		// The passive side leaves it 0: an INIT from any port.
		h.PeerPort = 5000
	}
	if h.ARwnd == 0 {
		h.ARwnd = cfg.ReceiveWindow
	}
	if h.OutboundStreams == 0 {
		h.OutboundStreams = 64
	}
	if h.InboundStreams == 0 {
		h.InboundStreams = 64
	}
	a := &Association{
		conn:        conn,
		cfg:         cfg,
		hsCfg:       h,
		in:          make(chan []byte, assocReadBuffers),
		free:        make(chan []byte, assocReadBuffers),
		readErr:     make(chan error, 1),
		wake:        make(chan struct{}, 1),
		closeReq:    make(chan struct{}),
		abortReq:    make(chan struct{}),
		done:        make(chan struct{}),
		estab:       make(chan struct{}),
		space:       make(chan struct{}, 1),
		acceptReady: make(chan struct{}, 1),
		streams:     make(map[uint16]*Stream),
		wbuf:        make([]byte, 0, cfg.MTU),
		sendWindow:  min(minSendWindow, cfg.SendBufferSize),
		pmdcs:       cfg.MTU - chunk.HeaderLen,
	}
	// User data per fragment, a multiple of 4 so that no DATA chunk but
	// a message's last is padded.
	a.fragSize = (a.pmdcs - chunk.DataHeaderLen) &^ 3
	for range assocReadBuffers {
		a.free <- make([]byte, assocReadBufSize)
	}
	now := time.Now()
	a.hsStart = now
	if active {
		w, err := NewCookieWait(&h, rand.Reader)
		if err != nil {
			return nil, err
		}
		a.cw = w
		a.state = stateCookieWait
		a.t1RTO = cfg.RTOInitial
	} else {
		if cfg.Keys != nil {
			a.keys = *cfg.Keys
		} else {
			k, err := NewCookieKeys(rand.Reader)
			if err != nil {
				return nil, err
			}
			a.keys = k
		}
		a.state = stateClosed
	}
	a.timer = time.NewTimer(time.Hour)
	a.readerWG.Add(1)
	go a.reader()
	go a.run(now)
	select {
	case <-a.estab:
		return a, nil
	case <-a.done:
		return nil, a.Err()
	}
}

// reader hands each packet read to the run loop, in buffers the loop
// gives back.
func (a *Association) reader() {
	defer a.readerWG.Done()
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		n, err := a.conn.Read(b[:cap(b)])
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			// A connected UDP socket reports the ICMP Port Unreachable
			// of an earlier packet: a lost packet, not the end of the
			// transport; the dead-peer rules decide about the peer.
			a.free <- b
			continue
		}
		if err != nil {
			// The loop takes the error after the packets read before
			// it: a peer may close its transport right after its last
			// packet (pion/sctp closes DTLS after SHUTDOWN COMPLETE),
			// and the association ends as that packet says.
			a.readErr <- fmt.Errorf("sctp: read: %w", err)
			return
		}
		select {
		case a.in <- b[:n]:
		case <-a.done:
			return
		}
	}
}

// setErr records err as the association's end unless it has ended
// already.
func (a *Association) setErr(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

func (a *Association) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Err returns the error the association ended with, or nil while it runs.
func (a *Association) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Done is closed when the association has ended.
func (a *Association) Done() <-chan struct{} { return a.done }

// Established returns the handshake's outcome.
func (a *Association) Established() Established { return a.est }

// run is the association's goroutine.
func (a *Association) run(now time.Time) {
	defer func() {
		a.timer.Stop()
		a.mu.Lock()
		if a.err == nil {
			a.err = ErrClosed
		}
		a.closing = true
		for _, m := range a.pending.all() {
			outMsgPool.Put(m)
		}
		a.pending.reset()
		a.mu.Unlock()
		close(a.done)
		a.conn.Close()
		a.readerWG.Wait()
	}()
	if a.cw != nil {
		a.send(a.cw.AppendInit(a.wbuf[:0]))
		a.t1 = now.Add(a.t1RTO)
	}
	closeReq, abortReq := a.closeReq, a.abortReq
	for {
		a.armTimer(now)
		select {
		case p := <-a.in:
			now = time.Now()
			a.handlePacket(now, p)
			a.free <- p[:cap(p)]
			a.drainIn(now) // what else waits, before sending
		case err := <-a.readErr:
			now = time.Now()
			a.drainIn(now) // the packets read before the error
			a.setErr(err)
		case <-a.wake:
			now = time.Now()
		case <-a.timer.C:
			now = time.Now()
			a.onTimer(now)
		case <-closeReq:
			closeReq = nil
			now = time.Now()
			a.closeWait = true
			if a.state < stateEstablished {
				a.setErr(ErrClosed)
				return
			}
			if a.state == stateEstablished {
				a.state = stateShutdownPending
				a.t2Count = 0
			}
		case <-abortReq:
			abortReq = nil
			a.sendAbort(chunk.RawCause{Code: chunk.CauseUserInitiatedAbort}.Append(nil))
			a.setErr(&AbortError{Cause: chunk.CauseUserInitiatedAbort})
			return
		}
		if a.Err() != nil {
			return
		}
		if a.state >= stateEstablished {
			a.takeReleases(now)
			a.heartbeatWanted(now)
			a.fillSender()
			a.checkDead(now)
			a.advanceShutdown(now)
			if a.Err() != nil || a.state == stateClosed {
				return
			}
			a.flush(now)
		}
	}
}

// drainIn handles the packets the reader has handed over and the loop
// has not taken yet.
func (a *Association) drainIn(now time.Time) {
	for {
		select {
		case p := <-a.in:
			a.handlePacket(now, p)
			a.free <- p[:cap(p)]
		default:
			return
		}
	}
}

func (a *Association) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// armTimer sets the one timer to the earliest deadline.
func (a *Association) armTimer(now time.Time) {
	var d time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	consider(a.t1)
	consider(a.t2)
	if a.state < stateEstablished {
		consider(a.hsStart.Add(a.cfg.HandshakeTimeout))
	} else {
		consider(a.snd.NextDeadline())
		if _, dl := a.rcv.SACKWhen(now); !dl.IsZero() {
			consider(dl)
		}
		consider(a.hbNext)
		if s := a.snd.SilentSince(); !s.IsZero() {
			consider(s.Add(a.cfg.DeadPeerTimeout))
		}
		if !a.hbSent.IsZero() {
			consider(a.lastRecv.Add(a.cfg.DeadPeerTimeout))
		}
	}
	wait := time.Hour
	if !d.IsZero() {
		wait = max(d.Sub(now), 0)
	}
	a.timer.Reset(wait)
}

// onTimer handles every deadline that has passed.
func (a *Association) onTimer(now time.Time) {
	if a.state < stateEstablished {
		if now.Sub(a.hsStart) >= a.cfg.HandshakeTimeout {
			a.setErr(ErrHandshakeTimeout)
			return
		}
		if !a.t1.IsZero() && !now.Before(a.t1) {
			// §5.1.6: retransmit, double the timer, give up after
			// Max.Init.Retransmits.
			a.t1Count++
			if a.t1Count > a.cfg.MaxInitRetransmits {
				a.setErr(ErrHandshakeTimeout)
				return
			}
			a.t1RTO = min(2*a.t1RTO, a.cfg.RTOMax)
			a.t1 = now.Add(a.t1RTO)
			if a.state == stateCookieWait {
				a.send(a.cw.AppendInit(a.wbuf[:0]))
			} else if a.ce != nil {
				a.send(a.ce.AppendCookieEcho(a.wbuf[:0]))
			}
		}
		return
	}
	if d := a.snd.NextDeadline(); !d.IsZero() && !now.Before(d) {
		a.snd.OnTimeout(now)
	}
	if !a.hbNext.IsZero() && !now.Before(a.hbNext) {
		a.heartbeat(now)
	}
	if !a.t2.IsZero() && !now.Before(a.t2) {
		a.t2Count++
		a.snd.HeartbeatUnanswered() // §9.2: T2 expiry counts as an error
		a.t2 = time.Time{}
		a.retransmitShutdown(now)
	}
}

func (a *Association) send(pkt []byte) {
	if _, err := a.conn.Write(pkt); err != nil && !errors.Is(err, net.ErrClosed) {
		// A failed write is a lost packet; retransmission repairs it.
		return
	}
}

// sendAbort sends an ABORT with causes, best effort.
func (a *Association) sendAbort(causes []byte) {
	var b chunk.Builder
	if a.state >= stateEstablished || a.state == stateCookieEchoed {
		b.Start(a.wbuf[:0], a.est.LocalPort, a.est.PeerPort, a.est.PeerVerificationTag)
		if a.state == stateCookieEchoed {
			b.Start(a.wbuf[:0], a.ce.Established.LocalPort, a.ce.Established.PeerPort, a.ce.Established.PeerVerificationTag)
		}
	} else {
		return
	}
	b.Buf = chunk.Abort{Causes: causes}.Append(b.Buf)
	a.send(b.Finish())
}

// establish builds the TCB from the handshake's outcome.
func (a *Association) establish(now time.Time, e Established) {
	a.est = e
	a.state = stateEstablished
	a.t1 = time.Time{}
	rtt := now.Sub(a.hsStart)
	a.snd = NewSender(SenderConfig{
		PMDCS: a.pmdcs, InitialTSN: TSN(e.LocalInitialTSN), PeerRwnd: e.PeerARwnd,
		RTOInitial: a.cfg.RTOInitial, RTOMin: a.cfg.RTOMin, RTOMax: a.cfg.RTOMax,
		AssociationMaxRetrans: a.cfg.MaxRetrans,
	}, now)
	if a.cw != nil && a.t1Count == 0 {
		a.snd.ObserveRTT(rtt)
	}
	var err error
	a.rcv, err = NewReceiver(ReceiverConfig{
		PeerInitialTSN: e.PeerInitialTSN, BufferSize: a.cfg.ReceiveBufferSize,
		InitialWindow:  a.cfg.ReceiveWindow,
		InboundStreams: e.InboundStreams, SACKDelay: a.cfg.SACKDelay,
	}, a.deliver)
	if err != nil {
		a.setErr(err)
		return
	}
	a.ssn = make([]uint16, e.OutboundStreams)
	a.tagTie = AssociationTags{Local: e.LocalVerificationTag, Peer: e.PeerVerificationTag}
	var tie [8]byte
	rand.Read(tie[:])
	a.tagTie.LocalTie = binary.BigEndian.Uint32(tie[:]) | 1
	a.tagTie.PeerTie = binary.BigEndian.Uint32(tie[4:]) | 1
	a.lastRecv = now
	a.rwnd = a.rcv.Window()
	a.scheduleHeartbeat(now)
	close(a.estab)
}

// deliver is the Receiver's callback.
func (a *Association) deliver(m RecvMessage) {
	if a.cfg.OnMessage != nil {
		a.cfg.OnMessage(m)
		return
	}
	im := inMsgPool.Get().(*inMsg)
	if cap(im.buf) < len(m.Data) {
		im.buf = make([]byte, len(m.Data))
	}
	im.buf = im.buf[:len(m.Data)]
	copy(im.buf, m.Data)
	im.streamID, im.ppid, im.unordered = m.StreamID, m.PPID, m.Unordered
	a.rcv.Hold(len(m.Data))
	a.mu.Lock()
	s, _ := a.streamLocked(m.StreamID)
	s.inbox.push(im)
	announce := !s.opened && !s.announced
	if announce {
		s.announced = true
		a.accepts = append(a.accepts, s)
	}
	a.mu.Unlock()
	a.signal(s.ready)
	if announce {
		a.signal(a.acceptReady)
	}
}

// checksumOK verifies the CRC32c, or accepts a zero Checksum where the
// handshake allows it (RFC 9653: never on INIT or COOKIE ECHO).
func (a *Association) checksumOK(p []byte) bool {
	h := chunk.Header(p)
	if !h.IsValid() {
		return false
	}
	if h.Checksum() == 0 && len(p) > chunk.HeaderLen {
		t := chunk.Type(p[chunk.HeaderLen])
		zeroOK := (a.state >= stateEstablished && a.est.ReceiveZeroChecksum) ||
			(a.state == stateCookieWait || a.state == stateCookieEchoed) && a.hsCfg.ZeroChecksum
		if zeroOK && t != chunk.TypeInit && t != chunk.TypeCookieEcho {
			return true
		}
	}
	return chunk.VerifyChecksum(p) == nil
}

// handlePacket processes one received packet.
func (a *Association) handlePacket(now time.Time, p []byte) {
	if !a.checksumOK(p) {
		return
	}
	if len(p) <= chunk.HeaderLen {
		return
	}
	first := chunk.Type(p[chunk.HeaderLen])
	switch a.state {
	case stateClosed:
		a.handleListen(now, p, first)
		return
	case stateCookieWait:
		if first == chunk.TypeInitAck {
			echo, ce, err := a.cw.HandleInitAck(a.wbuf[:0], p)
			if echo != nil {
				a.send(echo)
			}
			if err != nil {
				if echo != nil {
					a.setErr(err)
				}
				return
			}
			a.ce = ce
			a.state = stateCookieEchoed
			a.t1RTO = a.cfg.RTOInitial
			a.t1Count = 0
			a.t1 = now.Add(a.t1RTO)
			return
		}
		a.handleHandshakeOther(p, first)
		return
	case stateCookieEchoed:
		if first == chunk.TypeCookieAck {
			e, err := a.ce.HandleCookieAck(p)
			if err != nil {
				return
			}
			a.establish(now, e)
			a.handleChunks(now, p, true)
			return
		}
		if first == chunk.TypeError {
			if _, ok := a.ce.HandleStaleCookie(p); ok {
				a.setErr(ErrStaleCookie)
				return
			}
		}
		a.handleHandshakeOther(p, first)
		return
	}
	a.handleChunks(now, p, false)
}

// handleHandshakeOther handles an ABORT during the handshake; anything
// else is discarded.
func (a *Association) handleHandshakeOther(p []byte, first chunk.Type) {
	if first != chunk.TypeAbort {
		return
	}
	h := chunk.Header(p)
	it := chunk.Chunks(p)
	if !it.Next() {
		return
	}
	ab, _, err := chunk.ParseAbort(it.Chunk())
	if err != nil {
		return
	}
	var local, peer uint32
	if a.cw != nil {
		local = a.cw.LocalVerificationTag
	}
	if a.ce != nil {
		peer = a.ce.Established.PeerVerificationTag
	}
	// §8.5.1 B: in COOKIE-WAIT an ABORT with the T bit may carry the
	// INIT's tag, or the ABORT our own tag.
	if (!ab.T && h.VerificationTag() == local) || (ab.T && (h.VerificationTag() == peer || a.state == stateCookieWait && h.VerificationTag() == local)) {
		a.setErr(abortErr(ab, true))
	}
}

func abortErr(ab chunk.Abort, remote bool) *AbortError {
	e := &AbortError{Remote: remote}
	cs := chunk.Causes(ab.Causes)
	if cs.Next() {
		e.Cause = cs.Cause().Code()
		e.Info = append([]byte(nil), cs.Cause().Info()...)
	}
	return e
}

// handleListen is the passive side before an association exists: it
// answers INIT with INIT ACK, COOKIE ECHO with COOKIE ACK, and handles
// out-of-the-blue packets (§8.4).
func (a *Association) handleListen(now time.Time, p []byte, first chunk.Type) {
	switch first {
	case chunk.TypeInit:
		res, _ := HandleInit(a.wbuf[:0], p, &a.hsCfg, &a.keys, rand.Reader, now)
		if res.Packet != nil {
			a.send(res.Packet)
		}
	case chunk.TypeCookieEcho:
		c, err := OpenCookieEcho(p, &a.keys, now)
		if stale, ok := err.(*StaleCookieError); ok {
			a.send(c.AppendStaleCookieError(a.wbuf[:0], stale.Staleness))
			return
		}
		if err != nil {
			return
		}
		a.send(c.AppendCookieAck(a.wbuf[:0]))
		a.establish(now, c.Established())
		// The cookie was made when the INIT ACK was sent: its echo is a
		// round trip later, the passive side's first RTT measurement
		// (§6.3.1 C1), unless T1-cookie resent it.
		if rtt := now.Sub(c.Created); rtt > 0 && rtt < a.cfg.RTOInitial {
			a.snd.ObserveRTT(rtt)
		}
		a.handleChunks(now, p, true)
	case chunk.TypeShutdownAck:
		// §8.4 item 5: answer with SHUTDOWN COMPLETE, the T bit set and
		// the packet's Verification Tag.
		h := chunk.Header(p)
		var b chunk.Builder
		b.Start(a.wbuf[:0], h.DestinationPort(), h.SourcePort(), h.VerificationTag())
		b.Buf = chunk.ShutdownComplete{T: true}.Append(b.Buf)
		a.send(b.Finish())
	}
	// §8.4: any other out-of-the-blue packet is discarded; no ABORT is
	// sent before an association exists, which keeps the passive side
	// from answering spoofed packets.
}

// handleChunks processes the chunks of a packet of the established
// association. skipFirst skips the handshake chunk already handled.
func (a *Association) handleChunks(now time.Time, p []byte, skipFirst bool) {
	h := chunk.Header(p)
	if h.DestinationPort() != a.est.LocalPort || h.SourcePort() != a.est.PeerPort {
		return
	}
	vt := h.VerificationTag()
	it := chunk.Chunks(p)
	firstChunk := true
	var errCauses []byte
	sawData := false
	for it.Next() {
		c := it.Chunk()
		t := c.Type()
		if firstChunk {
			firstChunk = false
			if skipFirst {
				continue
			}
			// §8.5: the Verification Tag must be ours, except for the
			// chunks of §8.5.1 that may reflect the peer's.
			switch {
			case t == chunk.TypeInit:
				a.handleInitInAssociation(now, p)
				return
			case t == chunk.TypeAbort || t == chunk.TypeShutdownComplete:
				tbit := c.Flags()&1 != 0
				if !(!tbit && vt == a.est.LocalVerificationTag || tbit && vt == a.est.PeerVerificationTag) {
					return
				}
			case t == chunk.TypeCookieEcho:
				a.handleCookieEchoInAssociation(now, p)
				continue
			case vt != a.est.LocalVerificationTag:
				return
			}
			a.lastRecv = now
		}
		switch t {
		case chunk.TypeData:
			if a.state > stateShutdownSent {
				// §6: DATA only in ESTABLISHED, SHUTDOWN-PENDING and
				// SHUTDOWN-SENT; in SHUTDOWN-RECEIVED and later the
				// peer has promised none.
				continue
			}
			d, _, err := chunk.ParseData(c)
			if err != nil && !errors.Is(err, chunk.ErrNoUserData) {
				continue
			}
			sawData = true
			res, rerr := a.rcv.Data(d)
			if rerr != nil {
				var re *RecvError
				if errors.As(rerr, &re) {
					a.sendAbort(re.AppendCause(nil))
					a.setErr(&AbortError{Cause: re.Cause})
				} else {
					a.setErr(rerr)
				}
				return
			}
			if res == RecvInvalidStream {
				errCauses = chunk.InvalidStreamIdentifier{StreamID: d.StreamID}.Append(errCauses)
			}
		case chunk.TypeSACK:
			s, _, err := chunk.ParseSACK(c)
			if err != nil {
				continue
			}
			r := a.snd.HandleSACK(now, s)
			a.released = append(a.released, r.Released...)
		case chunk.TypeHeartbeat:
			// Echo the value as received (§8.3: "The Heartbeat Info
			// field ... MUST be returned unchanged"). A HEARTBEAT
			// without its mandatory Heartbeat Info parameter (§3.3.5;
			// pion/sctp sends one) is discarded: the HEARTBEAT ACK
			// "MUST contain the Heartbeat Information parameter of the
			// Heartbeat Request" (§3.3.6), and there is none to return.
			if _, _, err := chunk.ParseHeartbeat(c); err != nil {
				continue
			}
			v := c.Value()
			l := 4 + len(v)
			a.ctl = append(a.ctl, byte(chunk.TypeHeartbeatAck), 0, byte(l>>8), byte(l))
			a.ctl = append(a.ctl, v...)
			for range (4 - l%4) % 4 {
				a.ctl = append(a.ctl, 0)
			}
		case chunk.TypeHeartbeatAck:
			hb, _, err := chunk.ParseHeartbeatAck(c)
			if err != nil || len(hb.Info) != 16 || a.hbSent.IsZero() {
				continue
			}
			if binary.BigEndian.Uint64(hb.Info[8:]) != a.hbNonce {
				continue
			}
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(hb.Info)))
			a.snd.HeartbeatAcked(now.Sub(sent))
			a.hbSent = time.Time{}
			a.scheduleHeartbeat(now)
		case chunk.TypeAbort:
			ab, _, err := chunk.ParseAbort(c)
			if err != nil {
				continue
			}
			a.setErr(abortErr(ab, true))
			return
		case chunk.TypeShutdown:
			s, _, err := chunk.ParseShutdown(c)
			if err != nil {
				continue
			}
			a.handleShutdown(now, s)
		case chunk.TypeShutdownAck:
			if a.state == stateShutdownSent || a.state == stateShutdownAckSent {
				// §9.2: SHUTDOWN COMPLETE, then CLOSED.
				var b chunk.Builder
				b.Start(a.wbuf[:0], a.est.LocalPort, a.est.PeerPort, a.est.PeerVerificationTag)
				b.Buf = chunk.ShutdownComplete{}.Append(b.Buf)
				a.send(b.Finish())
				a.finishShutdown()
				return
			}
		case chunk.TypeShutdownComplete:
			if a.state == stateShutdownAckSent {
				a.finishShutdown()
				return
			}
		case chunk.TypeCookieAck, chunk.TypeError, chunk.TypeCookieEcho, chunk.TypeInitAck:
			// A late COOKIE ACK, an ERROR (reported by nothing here) or
			// a stray handshake chunk: nothing to do.
		default:
			act := t.Unrecognized()
			if act.Report() {
				errCauses = chunk.RawCause{Code: chunk.CauseUnrecognizedChunkType, Info: c.Unpadded()}.Append(errCauses)
			}
			if act.Stop() {
				goto end
			}
		}
	}
end:
	if sawData {
		a.rcv.EndPacket(now)
		if a.state == stateShutdownSent {
			// §9.2: "MUST immediately respond to each received packet
			// containing one or more DATA chunks with a SHUTDOWN chunk".
			a.t2 = time.Time{}
			a.retransmitShutdown(now)
		}
	}
	if len(errCauses) > 0 && len(errCauses) < a.cfg.MTU-chunk.HeaderLen-8 {
		a.ctl = chunk.OperationError{Causes: errCauses}.Append(a.ctl)
	}
}

// handleInitInAssociation answers an INIT for the existing association
// (§5.2.2) without changing its state.
func (a *Association) handleInitInAssociation(now time.Time, p []byte) {
	if a.state == stateShutdownAckSent {
		return
	}
	ex := ExistingAssociation{Tags: a.tagTie}
	res, _ := HandleUnexpectedInit(a.wbuf[:0], p, &a.hsCfg, &a.keys, rand.Reader, now, &ex)
	if res.Packet != nil {
		a.send(res.Packet)
	}
}

// handleCookieEchoInAssociation answers a COOKIE ECHO that the
// association already took: its COOKIE ACK was lost (§5.2.4 action D).
// Restarts and collisions are not taken: the cookie is discarded.
func (a *Association) handleCookieEchoInAssociation(now time.Time, p []byte) {
	if a.cw != nil {
		return // the active side never issued this cookie
	}
	c, err := OpenCookieEcho(p, &a.keys, now)
	stale := errors.Is(err, ErrStaleCookie)
	if err != nil && !stale {
		return
	}
	if DecideCookieEcho(&c, stale, a.tagTie) == CookieDuplicate {
		a.send(c.AppendCookieAck(a.wbuf[:0]))
	}
}

// minSendWindow is the least SendWindow: what a path of a few
// milliseconds needs before the congestion window has grown.
const minSendWindow = 256 << 10

// sendWindowFor is the SendWindow the Sender's state allows: twice what
// the congestion window or the flight lets out in a round trip, so that
// the next round trip's data is queued when the SACKs come, bounded by
// Config.SendBufferSize. It follows the congestion window down after a
// loss or an idle period.
func (a *Association) sendWindowFor() int {
	w := 2 * max(a.snd.Cwnd(), a.snd.FlightSize())
	return min(max(w, minSendWindow), a.cfg.SendBufferSize)
}

// SendWindow returns the bytes of user messages that may be queued or
// unacknowledged now; SendMessage waits beyond it.
func (a *Association) SendWindow() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sendWindow
}

// ReceiveWindow returns the receive buffer space the association
// advertises now (auto-tuned; see Config.ReceiveWindow).
func (a *Association) ReceiveWindow() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rwnd
}

// tuneWindow counts n bytes that the streams' readers took and grows or
// shrinks the receive window (Config.ReceiveWindow). The window grows
// with what is read, not with what arrives: a peer whose messages nobody
// reads, or that leaves gaps, holds no more than the window it has
// earned by being read.
func (a *Association) tuneWindow(now time.Time, n int) {
	srtt, _ := a.snd.SRTT()
	idle := max(time.Second, 8*srtt)
	if !a.lastData.IsZero() && now.Sub(a.lastData) > idle && a.rcv.Window() > a.cfg.ReceiveWindow {
		a.rcv.SetWindow(a.cfg.ReceiveWindow)
		a.rwEpoch, a.rwBytes = time.Time{}, 0
	}
	a.lastData = now
	if a.rwEpoch.IsZero() {
		a.rwEpoch = now
	}
	a.rwBytes += uint64(n)
	w := a.rcv.Window()
	if a.rwBytes < uint64(w)/2 {
		return
	}
	if srtt > 0 && now.Sub(a.rwEpoch) < 2*srtt && w < a.cfg.ReceiveBufferSize {
		a.rcv.SetWindow(uint32(min(2*uint64(w), uint64(a.cfg.ReceiveBufferSize))))
	}
	a.rwEpoch, a.rwBytes = now, 0
	a.mu.Lock()
	a.rwnd = a.rcv.Window()
	a.mu.Unlock()
}

// takeReleases returns acknowledged messages' bytes to the send buffer,
// and the bytes the streams' readers took to the receive window.
func (a *Association) takeReleases(now time.Time) {
	if len(a.released) == 0 {
		a.mu.Lock()
		rel := a.ulpRelease
		a.ulpRelease = 0
		a.mu.Unlock()
		if rel > 0 {
			a.rcv.Release(rel)
			a.tuneWindow(now, rel)
		}
		return
	}
	freed := 0
	a.mu.Lock()
	for i, c := range a.released {
		m := c.Ref.(*outMsg)
		m.left--
		if m.left == 0 {
			freed += len(m.buf)
			if s := a.streams[m.streamID]; s != nil {
				s.buffered -= len(m.buf)
				s.messages--
				if s.onAcked != nil && !s.ackedDue {
					s.ackedDue = true
					a.acked = append(a.acked, s)
				}
			}
			outMsgPool.Put(m)
		}
		a.released[i] = ReleasedChunk{}
	}
	a.released = a.released[:0]
	a.queuedBytes -= freed
	a.sendWindow = a.sendWindowFor()
	rel := a.ulpRelease
	a.ulpRelease = 0
	a.mu.Unlock()
	if rel > 0 {
		a.rcv.Release(rel)
		a.tuneWindow(now, rel)
	}
	a.signal(a.space)
	for i, s := range a.acked {
		a.mu.Lock()
		f := s.onAcked
		s.ackedDue = false
		a.mu.Unlock()
		f()
		a.acked[i] = nil
	}
	a.acked = a.acked[:0]
}

// fillSender moves queued user messages into the Sender, fragmented to
// the PMDCS, as far as its queue takes them.
func (a *Association) fillSender() {
	if a.state != stateEstablished && a.state != stateShutdownPending && a.state != stateShutdownReceived {
		return
	}
	for {
		if a.cur == nil {
			a.mu.Lock()
			if a.pending.len() == 0 {
				a.mu.Unlock()
				return
			}
			a.cur = a.pending.pop()
			a.mu.Unlock()
			a.curOff = 0
			a.cur.left = (len(a.cur.buf) + a.fragSize - 1) / a.fragSize
		}
		m := a.cur
		for a.curOff < len(m.buf) {
			end := min(a.curOff+a.fragSize, len(m.buf))
			d := chunk.Data{StreamID: m.streamID, PPID: m.ppid, UserData: m.buf[a.curOff:end]}
			if a.curOff == 0 {
				d.Flags |= chunk.FlagBeginning
			}
			if end == len(m.buf) {
				d.Flags |= chunk.FlagEnding
			}
			if m.unordered {
				d.Flags |= chunk.FlagUnordered
			} else {
				d.SSN = a.ssn[m.streamID]
			}
			if _, ok := a.snd.Queue(d, m); !ok {
				return
			}
			a.curOff = end
		}
		if !m.unordered {
			a.ssn[m.streamID]++
		}
		a.cur = nil
	}
}

// flush sends what is due: control chunks, the SACK, and DATA, bundled
// into packets of at most MTU bytes.
func (a *Association) flush(now time.Time) {
	mtu := a.cfg.MTU
	corked := false
	for {
		var b chunk.Builder
		b.Start(a.wbuf[:0], a.est.LocalPort, a.est.PeerPort, a.est.PeerVerificationTag)
		if len(a.ctl) > 0 && len(a.ctl) <= mtu-b.Len() {
			b.Buf = append(b.Buf, a.ctl...)
			a.ctl = a.ctl[:0]
		} else if len(a.ctl) > 0 {
			a.ctl = a.ctl[:0] // cannot fit: drop (HEARTBEAT ACKs and ERRORs are best effort)
		}
		sendNow, _ := a.rcv.SACKWhen(now)
		dataAllowed := a.state <= stateShutdownReceived
		if sendNow || a.rcv.SACKPending() && dataAllowed && a.snd.Unsent()+a.snd.FlightSize() > 0 && a.canSend() {
			b.Buf = a.rcv.AppendSACK(b.Buf, mtu-b.Len())
		}
		if dataAllowed {
			for {
				d, ok := a.snd.Next(now, mtu-b.Len())
				if !ok {
					break
				}
				b.Buf = d.Append(b.Buf)
			}
		}
		if b.Len() == chunk.HeaderLen {
			break
		}
		if !corked && a.cfg.Batcher != nil {
			a.cfg.Batcher.Cork()
			corked = true
		}
		if a.est.SendZeroChecksum {
			// The peer announced Zero Checksum Acceptable (RFC 9653):
			// over DTLS its MAC protects the packet, and the CRC32c of
			// every data packet is work for nothing.
			a.send(b.FinishZeroChecksum())
		} else {
			a.send(b.Finish())
		}
	}
	if corked {
		_ = a.cfg.Batcher.Flush() // what it could not send is lost, as a failed Write is
	}
}

// canSend reports whether the Sender may have DATA to send now; it
// avoids bundling a SACK early only to send it alone.
func (a *Association) canSend() bool { return a.snd.Unsent() > 0 }

// scheduleHeartbeat arms the next HEARTBEAT (§8.3: "the endpoint SHOULD
// send a HEARTBEAT chunk ... to an idle destination ... every RTO +
// HB.interval").
func (a *Association) scheduleHeartbeat(now time.Time) {
	if a.cfg.HeartbeatInterval < 0 {
		a.hbNext = time.Time{}
		return
	}
	a.hbNext = now.Add(a.cfg.HeartbeatInterval + a.snd.RTO())
}

// heartbeat sends a HEARTBEAT when the path is idle; one unanswered
// within an RTO counts toward the error counter.
func (a *Association) heartbeat(now time.Time) {
	if !a.hbSent.IsZero() {
		a.snd.HeartbeatUnanswered()
	}
	if a.snd.Outstanding() && a.hbSent.IsZero() {
		// Not idle: DATA and its SACKs probe the path.
		a.scheduleHeartbeat(now)
		return
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	a.hbNonce = binary.BigEndian.Uint64(nonce[:])
	var info [16]byte
	binary.BigEndian.PutUint64(info[:], uint64(now.UnixNano()))
	binary.BigEndian.PutUint64(info[8:], a.hbNonce)
	a.ctl = chunk.Heartbeat{Info: info[:]}.Append(a.ctl)
	a.hbSent = now
	a.hbNext = now.Add(a.snd.RTO())
}

// heartbeatWanted sends the HEARTBEAT that Heartbeat asked for, unless
// one is outstanding already.
func (a *Association) heartbeatWanted(now time.Time) {
	a.mu.Lock()
	want := a.hbWanted
	a.hbWanted = false
	a.mu.Unlock()
	if want && a.hbSent.IsZero() {
		a.heartbeat(now)
	}
}

// Heartbeat sends a HEARTBEAT now, unless one is outstanding: §11.1.10's
// REQUESTHEARTBEAT, which "Instructs the local endpoint to perform a
// heartbeat". Its answer counts as hearing from the peer, as every
// packet does.
func (a *Association) Heartbeat() {
	a.mu.Lock()
	a.hbWanted = true
	a.mu.Unlock()
	a.poke()
}

// MTU returns the largest SCTP packet the association sends.
func (a *Association) MTU() int { return a.cfg.MTU }

// checkDead ends the association when the peer is unreachable (§8.1).
func (a *Association) checkDead(now time.Time) {
	dead := a.snd.Dead()
	if s := a.snd.SilentSince(); !s.IsZero() && now.Sub(s) > a.cfg.DeadPeerTimeout {
		dead = true
	}
	if !a.hbSent.IsZero() && now.Sub(a.lastRecv) > a.cfg.DeadPeerTimeout {
		dead = true
	}
	if a.state >= stateShutdownSent && a.t2Count > a.cfg.MaxRetrans {
		dead = true
	}
	if dead {
		a.sendAbort(nil)
		a.setErr(ErrDeadPeer)
	}
}

// SendMessage queues a user message of the concatenated payload slices on
// streamID, blocking while the send buffer is full. The payload is copied
// once, into the association's buffer, and may be reused on return.
func (a *Association) SendMessage(streamID uint16, ppid uint32, unordered bool, payload [][]byte) error {
	return a.SendMessageContext(context.Background(), streamID, ppid, unordered, payload)
}

// TrySendMessage is SendMessage returning ErrWouldBlock instead of
// blocking; Writable's channel then says when to try again.
func (a *Association) TrySendMessage(streamID uint16, ppid uint32, unordered bool, payload [][]byte) error {
	return a.sendMessage(nil, streamID, ppid, unordered, payload)
}

// Writable returns a channel that receives when acknowledged data frees
// send buffer space.
func (a *Association) Writable() <-chan struct{} { return a.space }

// SendMessageContext is SendMessage, giving up when ctx is done.
func (a *Association) SendMessageContext(ctx context.Context, streamID uint16, ppid uint32, unordered bool, payload [][]byte) error {
	return a.sendMessage(ctx, streamID, ppid, unordered, payload)
}

func (a *Association) sendMessage(ctx context.Context, streamID uint16, ppid uint32, unordered bool, payload [][]byte) error {
	if streamID >= a.est.OutboundStreams {
		return ErrInvalidStream
	}
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	if n == 0 {
		return errors.New("sctp: empty message")
	}
	if n > a.cfg.SendBufferSize {
		return ErrMessageTooLarge
	}
	a.mu.Lock()
	for {
		if a.err != nil || a.closing {
			err := a.err
			a.mu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return err
		}
		if a.queuedBytes+n <= a.sendWindow || a.queuedBytes == 0 {
			break
		}
		a.mu.Unlock()
		if ctx == nil {
			return ErrWouldBlock
		}
		select {
		case <-a.space:
		case <-ctx.Done():
			return ctx.Err()
		case <-a.done:
		}
		a.mu.Lock()
	}
	a.queuedBytes += n
	m := outMsgPool.Get().(*outMsg)
	if cap(m.buf) < n {
		m.buf = make([]byte, n)
	}
	m.buf = m.buf[:0]
	for _, p := range payload {
		m.buf = append(m.buf, p...)
	}
	m.streamID, m.ppid, m.unordered = streamID, ppid, unordered
	a.pending.push(m)
	s, _ := a.streamLocked(streamID)
	s.buffered += n
	s.messages++
	room := a.queuedBytes < a.sendWindow
	a.mu.Unlock()
	// Pass the free space on to another waiting writer.
	if room {
		a.signal(a.space)
	}
	a.poke()
	return nil
}

// Close shuts the association down gracefully (§9.2): queued and
// outstanding data is delivered, then SHUTDOWN, SHUTDOWN ACK and
// SHUTDOWN COMPLETE are exchanged. It returns nil on a clean shutdown
// and the association's error otherwise.
func (a *Association) Close() error {
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	a.closeOnce.Do(func() { close(a.closeReq) })
	<-a.done
	a.readerWG.Wait()
	if err := a.Err(); err != ErrClosed {
		return err
	}
	return nil
}

// Shutdown is Close, giving up when ctx ends: the association is then
// aborted (§9.1) and ctx's error returned.
func (a *Association) Shutdown(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- a.Close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		a.Abort()
		<-done
		return ctx.Err()
	}
}

// Abort ends the association at once with an ABORT holding the
// User-Initiated Abort cause (§9.1).
func (a *Association) Abort() {
	a.abortOnce.Do(func() { close(a.abortReq) })
	<-a.done
	a.readerWG.Wait()
}
