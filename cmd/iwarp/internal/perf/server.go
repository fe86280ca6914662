package perf

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/admission"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// ReadDepth is the IRD and ORD of perf's queue pairs, and the AtomicIRD
// of its server: twice Linux siw's limit (SIW_MAX_IRD_QP, SIW_MAX_ORD_QP),
// which perftest, asking the device, uses for the RDMA Reads it keeps
// outstanding. A window of 128 RDMA Reads of 64 KiB (8 MiB) left the
// Read stream short between two processes on a two-core machine, 256 did
// not (docs/performance.md, "A window of 256 Reads").
const ReadDepth = 256

// Server answers perf clients: one ServerConn per connection, and a raw
// listener beside (ServeRawTCP, ServeRawSCTP) for their comparisons.
type Server struct {
	lim    Limits
	dev    *rdmap.Device
	adm    *admission.Admission // perf connections and the octets they hold
	rawAdm *admission.Admission // raw connections (their buffers are their perf connection's)

	rawPort atomic.Uint32

	mu       sync.Mutex // guards the fields below
	tokens   map[[TokenLen]byte]*ServerConn
	refusing int // connections admitted only to be told why not
}

// NewServer returns a server with the limits given (zero fields: the
// defaults).
func NewServer(lim Limits) *Server {
	lim = lim.withDefaults()
	return &Server{lim: lim, dev: rdmap.NewDevice(rdmap.DeviceConfig{}), adm: newAdmission(lim),
		rawAdm: newAdmission(lim), tokens: make(map[[TokenLen]byte]*ServerConn)}
}

// Limits returns the server's limits, defaults filled in.
func (s *Server) Limits() Limits { return s.lim }

// SetRawPort sets the port of the raw listener that adverts name.
func (s *Server) SetRawPort(port uint16) { s.rawPort.Store(uint32(port)) }

// Usage returns the perf connections served and the octets counted
// against the memory budget.
func (s *Server) Usage() (conns int, octets int64) { return s.adm.Usage() }

// ServerConn is the server's side of one perf connection: a protection
// domain of its own, limited to what its hello was granted, and a queue
// pair for the transport to start.
type ServerConn struct {
	s    *Server
	peer string
	// refusal, if set: the hello is answered with it. refusing: the
	// connection was admitted at a connection limit, only for that.
	refusal  *RefusedError
	refusing bool

	pd       *rdmap.ProtectionDomain
	qp       *rdmap.QueuePair
	scq, rcq *rdmap.CompletionQueue
	ctl      *rdmap.MemoryRegion
	regions  []*rdmap.MemoryRegion
	activity atomic.Uint64 // segments placed or sent
	replies  uint64        // control Sends posted (Serve's goroutine)

	// What the hello was granted.
	hello   Ctl
	granted int64 // octets counted by admission Grow
	data    *rdmap.MemoryRegion
	echo    *rdmap.MemoryRegion
	bufs    *recvBuffers
	token   [TokenLen]byte
	rawSrc  []byte // the raw transfers' pattern
	rawBuf  []byte // their reads (and staged writes)

	// rawTurn is held by the raw transfer under way: one at a time.
	rawTurn chan struct{}

	mu       sync.Mutex // guards the fields below
	released bool
	rawStop  func() // ends the raw transfer under way
	rawWG    sync.WaitGroup
}

// Admit admits a connection from peer (host:port) and returns the queue
// pair to start on it. At a connection limit it returns a connection that
// only tells the client why (Serve answers its hello with the refusal), so
// that the client can say so; past as many of those as MaxConns, it
// returns the *RefusedError, and the caller rejects the connection.
func (s *Server) Admit(peer string) (*ServerConn, error) {
	c := &ServerConn{s: s, peer: peer, rawTurn: make(chan struct{}, 1)}
	if r := refusedBy(s.adm.Take(peer, ConnOverhead)); r != nil {
		s.mu.Lock()
		if s.refusing >= s.lim.MaxConns {
			s.mu.Unlock()
			return nil, r
		}
		s.refusing++
		s.mu.Unlock()
		c.refusal, c.refusing = r, true
	}
	c.pd = s.dev.NewProtectionDomain()
	// The hello's buffer and the control messages' region; the hello
	// raises the limits to what it is granted.
	c.pd.SetLimits(2, 2*CtlLen)
	recvDepth, sendDepth := s.lim.MaxRecvBuffers+1, 128
	if c.refusing {
		recvDepth, sendDepth = 1, 4
	}
	c.scq = s.dev.NewCompletionQueue(sendDepth + 16)
	c.rcq = s.dev.NewCompletionQueue(recvDepth + 16)
	obs := trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentPlaced || e.Kind == trace.SegmentSent {
			c.activity.Add(1)
		}
	})
	// The server waits only for receives; its send completions (control
	// replies, errors) are taken on the way. On a CQ of their own the
	// waiting goroutine reads the connection itself
	// (CompletionQueue.Wait).
	var err error
	c.qp, err = c.pd.NewQueuePair(rdmap.QPConfig{SendCQ: c.scq, RecvCQ: c.rcq, IRD: ReadDepth, ORD: ReadDepth,
		AtomicIRD: ReadDepth, SendDepth: sendDepth, RecvDepth: recvDepth, Observer: obs})
	if err == nil {
		c.ctl, err = c.pd.RegisterMemory(make([]byte, CtlLen), 0, 0)
	}
	if err == nil {
		c.bufs, err = newRecvBuffers(c.pd, c.qp, 1, CtlLen, helloWRID)
	}
	if err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// Handle serves one connection request from peer (host:port): it admits
// it (Admit), has accept start the queue pair on the transport (accept
// returns how to close the connection), serves it (Serve) and closes it.
// A request the server does not take at all is given to reject. It
// returns when the connection has ended, with Serve's error (a
// *RefusedError for a client told why), Admit's, or accept's.
func (s *Server) Handle(ctx context.Context, peer string, accept func(*rdmap.QueuePair) (func(context.Context), error), reject func()) error {
	c, err := s.Admit(peer)
	if err != nil {
		reject()
		return err
	}
	closeConn, err := accept(c.QueuePair())
	if err != nil {
		c.Abort()
		return err
	}
	err = c.Serve(ctx)
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	closeConn(cctx)
	cancel()
	return err
}

// QueuePair returns the queue pair for the transport to start.
func (c *ServerConn) QueuePair() *rdmap.QueuePair { return c.qp }

// Abort gives back what Admit took, when the transport could not start
// the queue pair.
func (c *ServerConn) Abort() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.qp.Close(ctx)
	cancel()
	c.release()
}

// release deregisters the connection's memory and gives back its counts;
// it ends a raw transfer under way first.
func (c *ServerConn) release() {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	c.released = true
	stop := c.rawStop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	c.rawWG.Wait()
	s := c.s
	s.mu.Lock()
	if s.tokens[c.token] == c {
		delete(s.tokens, c.token)
	}
	if c.refusing {
		s.refusing--
	}
	s.mu.Unlock()
	if c.bufs != nil {
		c.bufs.close()
	}
	for _, mr := range append(c.regions, c.ctl) {
		if mr != nil {
			mr.Deregister()
		}
	}
	c.rawSrc, c.rawBuf = nil, nil
	if c.granted > 0 {
		s.adm.Shrink(c.granted)
	}
	if !c.refusing {
		s.adm.Release(c.peer, ConnOverhead)
	}
}

// WRIDs of the server's receives: the hello's buffer, then the buffers the
// hello asked for; control Sends count up from ctlWRID.
const (
	helloWRID = 1 << 40
	bufsWRID  = 1 << 32
	ctlWRID   = 1 << 62
)

// errIdle ends a connection on which nothing moved for IdleTimeout.
var errIdle = errors.New("perf: idle for too long")

// Serve answers the client until it goes, ctx ends, or the connection is
// idle past the limits; then it gives back what the connection held. The
// caller closes the transport connection after it returns. A client
// refused (told why) is Serve's *RefusedError.
func (c *ServerConn) Serve(ctx context.Context) error {
	defer c.release()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.qp.Terminated():
			cancel(nil)
		case <-cctx.Done():
		}
	}()
	// Nothing at all before the hello's deadline, then nothing moving for
	// IdleTimeout, ends the connection.
	stopIdle := watch(c.s.lim.IdleTimeout, &c.activity, func() { cancel(errIdle) })
	defer stopIdle()
	hctx, hcancel := context.WithTimeout(cctx, c.s.lim.HelloTimeout)
	m, err := c.next(hctx)
	hcancel()
	if err != nil {
		return c.ended(ctx, cctx, err)
	}
	if m.Type != CtlHello {
		return fmt.Errorf("the client sent %v before its hello", m.Type)
	}
	if c.refusal == nil {
		c.refusal = c.grant(m)
	}
	if r := c.refusal; r != nil {
		if err := c.reply(Ctl{Type: CtlRefuse, Code: r.Code, Asked: r.Asked, Limit: r.Limit}); err != nil {
			return err
		}
		return r
	}
	ird, _ := c.qp.AtomicLimits()
	adv := Ctl{Type: CtlAdvert, N: max(1, m.N/4), RawPort: uint16(c.s.rawPort.Load()), AtomicIRD: uint16(ird), Token: c.token}
	if c.data != nil {
		adv.STag, adv.Size = c.data.STag(), uint32(c.data.Len())
	}
	if err := c.reply(adv); err != nil {
		return err
	}
	var test Ctl
	var count uint32 // data Sends received in the current test
	credit := adv.N
	for {
		cp, err := c.wait(cctx)
		if err != nil {
			return c.ended(ctx, cctx, err)
		}
		msg, repost := c.bufs.take(cp)
		m, _, perr := ParseCtl(msg)
		if perr != nil {
			// A data Send: credits (bandwidth), an echo (Send latency),
			// a Write back (Write latency).
			if err := repost(); err != nil {
				return err
			}
			count++
			if err := c.answerData(&test, count, credit, len(msg)); err != nil {
				return err
			}
			continue
		}
		switch m.Type {
		case CtlStart:
			if m.Op != c.hello.Op || m.Flags&FlagLat != c.hello.Flags&FlagLat || m.Size == 0 || m.Size > c.hello.Size {
				return fmt.Errorf("a %v test of %d octets after a hello for %v of at most %d", m.Op, m.Size, c.hello.Op, c.hello.Size)
			}
			test, count = m, 0
		case CtlDone:
		default:
			return fmt.Errorf("unexpected control message %v", m.Type)
		}
		if err := repost(); err != nil {
			return err
		}
		if err := c.reply(Ctl{Type: CtlAck}); err != nil {
			return err
		}
	}
}

// ended tells why the connection ended: nil when the client went or the
// server stops.
func (c *ServerConn) ended(ctx, cctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil, c.qp.Err() != nil:
		return nil
	case errors.Is(context.Cause(cctx), errIdle):
		return errIdle
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("no hello within the hello timeout")
	}
	return err
}

// next waits for the hello's receive.
func (c *ServerConn) next(ctx context.Context) (Ctl, error) {
	cp, err := c.wait(ctx)
	if err != nil {
		return Ctl{}, err
	}
	msg, _ := c.bufs.take(cp)
	m, _, err := ParseCtl(msg)
	if err != nil {
		return Ctl{}, errors.New("the client sent data before its hello")
	}
	return m, nil
}

// wait returns the next receive completion, taking send completions on
// the way; a completion in error ends the connection.
func (c *ServerConn) wait(ctx context.Context) (rdmap.Completion, error) {
	for {
		cp, err := waitEither(ctx, c.scq, c.rcq)
		if err != nil {
			return cp, err
		}
		if cp.Status != rdmap.StatusSuccess {
			if qerr := c.qp.Err(); qerr != nil {
				return cp, qerr
			}
			return cp, fmt.Errorf("%v completion: %v %v", cp.Op, cp.Status, cp.Err)
		}
		if cp.Op == rdmap.WorkRecv {
			return cp, nil
		}
	}
}

// need returns the octets a hello asks the server to hold: the region the
// client writes, reads or operates on, the buffers of its echoes, its
// receive buffers, and the raw transfers' buffers. Its fields must have
// been checked (valid).
func need(m Ctl) int64 {
	size := int64(m.Size)
	n := int64(m.N) * int64(m.BufLen)
	lat := m.Flags&FlagLat != 0
	switch m.Op {
	case OpWrite:
		n += size // the region written
		if lat {
			n += size // the Writes back
		}
	case OpRead:
		n += size
	case OpAtomic:
		n += 8
	case OpSend:
		if lat {
			n += size // the echoes
		}
	}
	if m.Flags&FlagRaw != 0 {
		n += 2 * RawBufLen
	}
	return n
}

// valid checks a hello's fields against the server's ranges.
func (c *ServerConn) valid(m Ctl) bool {
	lim := c.s.lim
	switch {
	case !m.Op.valid(), m.Size == 0, m.Size > MaxSize, m.Op == OpAtomic && m.Size != 8:
		return false
	case m.N == 0, int(m.N) > lim.MaxRecvBuffers:
		return false
	case m.BufLen < CtlLen, m.BufLen > max(CtlLen, m.Size):
		return false
	}
	return true
}

// grant allocates what the hello asks if the budgets have it, or returns
// the refusal.
func (c *ServerConn) grant(m Ctl) *RefusedError {
	if !c.valid(m) {
		return &RefusedError{Code: RefusedBadHello}
	}
	n := need(m)
	if n > c.s.lim.ConnBudget {
		return &RefusedError{Code: RefusedConnBudget, Asked: uint64(n), Limit: uint64(c.s.lim.ConnBudget)}
	}
	if r := refusedBy(c.s.adm.Grow(n)); r != nil {
		return r
	}
	c.granted = n
	c.hello = m
	raw := int64(0)
	if m.Flags&FlagRaw != 0 {
		raw = 2 * RawBufLen
	}
	// The domain registers what was granted and nothing more.
	c.pd.SetLimits(int(m.N)+4, n-raw+2*CtlLen)
	if err := c.allocate(m); err != nil {
		return &RefusedError{Code: RefusedBadHello}
	}
	return nil
}

// allocate registers the hello's regions and posts its receive buffers.
func (c *ServerConn) allocate(m Ctl) error {
	size := int(m.Size)
	lat := m.Flags&FlagLat != 0
	register := func(n int, access rdmap.Access) (*rdmap.MemoryRegion, error) {
		mr, err := c.pd.RegisterMemory(pattern(n), 0, access)
		if err == nil {
			c.regions = append(c.regions, mr)
		}
		return mr, err
	}
	var err error
	switch m.Op {
	case OpWrite:
		c.data, err = register(size, rdmap.RemoteWrite|rdmap.LocalWrite)
		if err == nil && lat {
			c.echo, err = register(size, 0)
		}
	case OpRead:
		c.data, err = register(size, rdmap.RemoteRead)
	case OpAtomic:
		c.data, err = register(8, rdmap.RemoteAtomic|rdmap.RemoteRead)
	case OpSend:
		if lat {
			c.echo, err = register(size, 0)
		}
	}
	if err != nil {
		return err
	}
	// The hello's buffer gives way to the buffers asked for.
	c.bufs.close()
	c.bufs = nil
	if c.bufs, err = newRecvBuffers(c.pd, c.qp, int(m.N), int(m.BufLen), bufsWRID); err != nil {
		return err
	}
	if m.Flags&FlagRaw != 0 {
		if _, err := rand.Read(c.token[:]); err != nil {
			return err
		}
		c.rawSrc, c.rawBuf = pattern(RawBufLen), make([]byte, RawBufLen)
		c.s.mu.Lock()
		c.s.tokens[c.token] = c
		c.s.mu.Unlock()
	}
	return nil
}

// reply posts a control message. Only Serve's goroutine calls it: the
// control region's octets are taken when the Send is posted (inline).
func (c *ServerConn) reply(m Ctl) error {
	c.replies++
	return sendCtl(c.qp, c.ctl, ctlWRID+c.replies, m)
}

// answerData handles a data Send: it returns credits (bandwidth), echoes
// it (Send latency) or writes back (Write latency).
func (c *ServerConn) answerData(test *Ctl, count, credit uint32, n int) error {
	lat := test.Flags&FlagLat != 0
	switch {
	case test.Op == OpSend && !lat:
		if count%credit == 0 {
			return c.reply(Ctl{Type: CtlCredit, N: credit})
		}
	case test.Op == OpSend:
		if n > c.echo.Len() {
			return errors.New("an echo larger than the hello said")
		}
		return c.qp.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: c.echo, Length: uint32(n)}}, Unsignaled: true})
	case test.Op == OpWrite && lat:
		if err := c.qp.PostWrite(rdmap.WriteWR{ID: 3, SGL: []rdmap.SGE{{MR: c.echo, Length: test.Size}},
			RemoteSTag: c.hello.STag, RemoteTO: c.hello.TO, Unsignaled: true}); err != nil {
			return err
		}
		return c.qp.PostSend(rdmap.SendWR{ID: 4, Unsignaled: true})
	}
	return nil
}

// rawConn returns the perf connection a raw transfer's token names and
// takes its turn for one, if h is within what its hello was granted;
// stop ends the transfer if the connection goes first. rawDone ends it.
func (s *Server) rawConn(h RawHeader, stop func()) (*ServerConn, error) {
	s.mu.Lock()
	c := s.tokens[h.Token]
	s.mu.Unlock()
	if c == nil {
		return nil, errors.New("no perf connection has this token")
	}
	// A stream carries messages of at most the hello's size; the round
	// trips' requests and answers may also be as large as a control
	// message (Read and Atomic Requests, Atomic Responses).
	size, small := c.hello.Size, uint32(CtlLen)
	if h.Mode == RawRPC {
		size = max(size, small)
	}
	if h.Size > size || (h.Mode == RawRPC && (h.Req > size || h.Window > ReadDepth)) {
		return nil, fmt.Errorf("a raw %v transfer of %d octets beyond the hello's %d", h.Mode, h.Size, size)
	}
	// The client starts a transfer once it has seen the end of the last
	// one, which the server may not have finished winding down.
	select {
	case c.rawTurn <- struct{}{}:
	case <-time.After(time.Second):
		return nil, errors.New("the perf connection has a raw transfer under way")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		<-c.rawTurn
		return nil, errors.New("the perf connection is gone")
	}
	c.rawStop = stop
	c.rawWG.Add(1)
	return c, nil
}

// rawDone ends c's raw transfer.
func (c *ServerConn) rawDone() {
	c.mu.Lock()
	c.rawStop = nil
	c.mu.Unlock()
	<-c.rawTurn
	c.rawWG.Done()
}

// watch calls idle once nothing has added to progress for a whole period
// of d (so between d and 2d after the last progress), until the returned
// function is called. It costs a timer per period, nothing per
// operation but the caller's atomic add.
func watch(d time.Duration, progress *atomic.Uint64, idle func()) func() {
	var mu sync.Mutex
	stopped := false
	last := progress.Load()
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		now := progress.Load()
		if now == last {
			idle()
			return
		}
		last = now
		t.Reset(d)
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}
