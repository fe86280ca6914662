package perf

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// ClientConfig is what a client measures and how it connects.
type ClientConfig struct {
	Op Op
	// Atomic is the Atomic Operation of OpAtomic: rdmap.FetchAdd (the
	// default) or rdmap.CmpSwap.
	Atomic rdmap.AtomicOp
	Lat    bool // latency instead of bandwidth
	// MaxSize is the largest message of the run (8 for OpAtomic).
	MaxSize int
	// Iters, or Duration, is how long each test runs.
	Iters    int
	Duration time.Duration
	// Depth is how many operations a bandwidth test keeps outstanding
	// (RDMA Reads and Atomics: at most the ORD and the server's IRD).
	Depth int
	// CQMod: a bandwidth test asks for a completion every CQMod
	// operations (at most half of Depth).
	CQMod int
	// CompareRaw also moves the same octets over the raw transport, in
	// the same run (see RawLink).
	CompareRaw bool
	// Connect starts qp on a connection to the perf server.
	Connect func(ctx context.Context, qp *rdmap.QueuePair) (*Link, error)
	// DialRaw connects to the server's raw listener at port (CompareRaw).
	DialRaw func(ctx context.Context, port uint16) (*RawLink, error)
	// Progress, if set, hears how far a test is (0 to 1), now and then.
	Progress func(size int, frac float64)
}

// Link is the client's connection, as Connect made it.
type Link struct {
	Transport string // "tcp" or "sctp"
	Info      string // a line that describes it
	// CRC: the MPA connection uses CRCs, so the raw TCP baseline
	// computes CRC32c too.
	CRC bool
	// Close closes the queue pair and the connection, draining until ctx
	// ends.
	Close func(ctx context.Context)
}

// Client is a connection to a perf server, ready to run tests.
type Client struct {
	cfg  ClientConfig
	link *Link

	dev      *rdmap.Device
	pd       *rdmap.ProtectionDomain
	qp       *rdmap.QueuePair
	scq, rcq *rdmap.CompletionQueue
	ctl      *rdmap.MemoryRegion
	data     *rdmap.MemoryRegion // source of Writes and Sends, sink of Reads and Atomics
	bufs     *recvBuffers
	ctlID    uint64

	remote     Ctl // the advert
	credits    int // Sends the server has buffers for
	serverBufs int // receive buffers the server posts
	// Raw buffers.
	rawSrc, rawBuf []byte
}

// WRIDs: data operations count up from 1; control Sends have bit 62.

// Connect connects to a perf server and exchanges the hello and the advert:
// the server has granted what the run needs, or Connect returns its
// *RefusedError.
func Connect(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.Atomic == 0 && cfg.Op == OpAtomic {
		cfg.Atomic = rdmap.FetchAdd
	}
	c := &Client{cfg: cfg, dev: rdmap.NewDevice(rdmap.DeviceConfig{})}
	c.pd = c.dev.NewProtectionDomain()
	c.scq = c.dev.NewCompletionQueue(cfg.Depth + 1024)
	c.rcq = c.scq
	if cfg.Lat && (cfg.Op == OpSend || cfg.Op == OpWrite) {
		// A Send or Write latency test waits only for receives: on a CQ
		// of their own, the waiting goroutine reads the connection
		// itself (CompletionQueue.Wait), as an application waiting on
		// its receive CQ does. (A Read or Atomic latency test's waiter
		// does so on the one CQ: its one outstanding work request can
		// only complete from the connection.)
		c.rcq = c.dev.NewCompletionQueue(1024)
	}
	var err error
	c.qp, err = c.pd.NewQueuePair(rdmap.QPConfig{SendCQ: c.scq, RecvCQ: c.rcq, IRD: ReadDepth, ORD: ReadDepth,
		AtomicIRD: 1, AtomicORD: ReadDepth, SendDepth: cfg.Depth + 64, RecvDepth: 1024})
	if err != nil {
		return nil, err
	}
	if c.ctl, err = c.pd.RegisterMemory(make([]byte, CtlLen), 0, 0); err == nil {
		c.data, err = c.pd.RegisterMemory(pattern(max(cfg.MaxSize, 8)), 0, rdmap.RemoteWrite|rdmap.LocalWrite)
	}
	// Receive buffers: control messages, and the echoes of a Send
	// ping-pong.
	bufLen := CtlLen
	if cfg.Op == OpSend && cfg.Lat {
		bufLen = max(bufLen, cfg.MaxSize)
	}
	if err == nil {
		c.bufs, err = newRecvBuffers(c.pd, c.qp, 32, bufLen, 1<<32)
	}
	if err != nil {
		c.qp.Close(ctx)
		return nil, err
	}
	// The server's receive buffers: for a Send bandwidth test about 32
	// MiB of them; else a few (a ping-pong has one data Send out at a
	// time, besides the control messages).
	c.serverBufs = 4
	if cfg.Op == OpSend && !cfg.Lat {
		c.serverBufs = max(4, min(DefaultMaxRecvBuffers, (32<<20)/max(cfg.MaxSize, CtlLen)))
	}
	serverBufLen := CtlLen
	if cfg.Op == OpSend {
		serverBufLen = max(CtlLen, cfg.MaxSize)
	}
	if c.link, err = cfg.Connect(ctx, c.qp); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.qp.Close(closeCtx)
		cancel()
		return nil, err
	}
	hello := Ctl{Type: CtlHello, Op: cfg.Op, Size: uint32(cfg.MaxSize), N: uint32(c.serverBufs), BufLen: uint32(serverBufLen),
		STag: c.data.STag(), Flags: c.flags()}
	if cfg.CompareRaw {
		hello.Flags |= FlagRaw
	}
	if err := c.sendCtl(hello); err != nil {
		c.Close()
		return nil, err
	}
	if c.remote, err = c.waitCtl(ctx, CtlAdvert); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.CompareRaw {
		c.rawSrc, c.rawBuf = pattern(RawBufLen), make([]byte, RawBufLen)
	}
	return c, nil
}

// Link returns the connection's description.
func (c *Client) Link() *Link { return c.link }

// Close closes the connection.
func (c *Client) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.link.Close(ctx)
}

func (c *Client) flags() uint8 {
	if c.cfg.Lat {
		return FlagLat
	}
	return 0
}

func (c *Client) sendCtl(m Ctl) error {
	c.ctlID++
	return sendCtl(c.qp, c.ctl, ctlWRID+c.ctlID, m)
}

// wait returns the next completion, failing on an error status.
func (c *Client) wait(ctx context.Context) (rdmap.Completion, error) {
	cp, err := waitEither(ctx, c.scq, c.rcq)
	if err != nil {
		if qerr := c.qp.Err(); qerr != nil {
			return cp, fmt.Errorf("connection ended: %v", qerr)
		}
		return cp, err
	}
	if cp.Status != rdmap.StatusSuccess {
		if qerr := c.qp.Err(); qerr != nil {
			return cp, fmt.Errorf("connection ended: %v", qerr)
		}
		return cp, fmt.Errorf("%v failed: %v %v", cp.Op, cp.Status, cp.Err)
	}
	return cp, nil
}

// handleRecv takes a receive completion: credits are counted, other
// control messages returned. It reposts the buffer (an error doing so is
// returned with the message).
func (c *Client) handleRecv(cp rdmap.Completion) (Ctl, bool, error) {
	msg, repost := c.bufs.take(cp)
	m, _, perr := ParseCtl(msg)
	err := repost()
	if perr != nil {
		return m, false, err
	}
	if err != nil {
		return m, true, err
	}
	if m.Type == CtlCredit {
		c.credits += int(m.N)
		return m, false, nil
	}
	return m, true, nil
}

// waitCtl waits for a control message of type typ, taking credits and
// send completions on the way. A refusal is returned as *RefusedError.
func (c *Client) waitCtl(ctx context.Context, typ CtlType) (Ctl, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		cp, err := c.wait(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return Ctl{}, errors.New("the server does not answer")
			}
			return Ctl{}, err
		}
		if cp.Op != rdmap.WorkRecv {
			continue
		}
		m, isCtl, err := c.handleRecv(cp)
		switch {
		case isCtl && m.Type == CtlRefuse:
			// The server closes the connection after it: reposting the
			// buffer may fail.
			return m, &RefusedError{Code: m.Code, Asked: m.Asked, Limit: m.Limit}
		case err != nil:
			return m, err
		case !isCtl:
		case m.Type == typ:
			return m, nil
		default:
			return m, fmt.Errorf("unexpected control message %v from the server", m.Type)
		}
	}
}

// Run runs one size's test: the bandwidth or latency test, alternating
// with the raw transport's with CompareRaw.
func (c *Client) Run(ctx context.Context, size int) (Stats, error) {
	if size > c.cfg.MaxSize {
		return Stats{}, fmt.Errorf("size %d above the run's %d", size, c.cfg.MaxSize)
	}
	switch {
	case c.cfg.Lat && c.cfg.CompareRaw:
		return c.compareLat(ctx, size)
	case c.cfg.Lat:
		st, _, err := c.latTest(ctx, size, c.cfg.Iters, c.cfg.Duration)
		return st, err
	case c.cfg.CompareRaw:
		return c.compareBW(ctx, size)
	}
	return c.bwTest(ctx, size, c.cfg.Iters, c.cfg.Duration)
}

// start tells the server what comes next.
func (c *Client) start(ctx context.Context, size int) error {
	if err := c.sendCtl(Ctl{Type: CtlStart, Op: c.cfg.Op, Flags: c.flags(), Size: uint32(size)}); err != nil {
		return err
	}
	_, err := c.waitCtl(ctx, CtlAck)
	// The server has reposted every buffer before it answers (what it
	// received before the start has been answered too): as many Sends
	// may come as it has buffers, but for one kept for the done.
	c.credits = c.serverBufs - 1
	return err
}

// post posts data operation id of size octets; only a signaled one
// completes on the CQ when it succeeds.
func (c *Client) post(id uint64, size int, signaled bool) error {
	sge := rdmap.SGE{MR: c.data, Length: uint32(size)}
	switch c.cfg.Op {
	case OpWrite:
		return c.qp.PostWrite(rdmap.WriteWR{ID: id, SGL: []rdmap.SGE{sge}, RemoteSTag: c.remote.STag, RemoteTO: c.remote.TO, Unsignaled: !signaled})
	case OpRead:
		return c.qp.PostRead(rdmap.ReadWR{ID: id, Local: sge, RemoteSTag: c.remote.STag, RemoteTO: c.remote.TO, Unsignaled: !signaled})
	case OpAtomic:
		return c.qp.PostAtomic(c.atomicWR(id, signaled))
	}
	return c.qp.PostSend(rdmap.SendWR{ID: id, SGL: []rdmap.SGE{sge}, Unsignaled: !signaled})
}

// atomicWR is operation id of an atomic test: a FetchAdd of 1, or a
// CmpSwap that swaps the word for the ID when it holds 0 (it does once;
// perftest's ib_atomic_bw compares and swaps likewise whatever the
// outcome).
func (c *Client) atomicWR(id uint64, signaled bool) rdmap.AtomicWR {
	wr := rdmap.AtomicWR{ID: id, Op: c.cfg.Atomic, Local: rdmap.SGE{MR: c.data, Length: 8},
		RemoteSTag: c.remote.STag, RemoteTO: c.remote.TO, Unsignaled: !signaled}
	if wr.Op == rdmap.CmpSwap {
		wr.Swap = id
	} else {
		wr.Add = 1
	}
	return wr
}

// limit returns how many operations a bandwidth test keeps outstanding.
func (c *Client) limit() int {
	limit := c.cfg.Depth
	switch c.cfg.Op {
	case OpRead:
		_, ord := c.qp.ReadLimits()
		limit = min(limit, max(1, ord))
	case OpAtomic:
		_, ord := c.qp.AtomicLimits()
		limit = min(limit, max(1, ord), max(1, int(c.remote.AtomicIRD)))
	}
	return limit
}
