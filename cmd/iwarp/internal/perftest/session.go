package perftest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

// Result is what one end of a session measured and saw.
type Result struct {
	Test   Test
	Client bool
	Size   int
	Iters  int
	// BW is a bandwidth test's figures: the client's measurement; for the
	// server of ib_write_bw and ib_read_bw, the client's report as it
	// came in xchg_bw_reports (what perftest's server prints); for the
	// server of ib_send_bw, its own (perftest's receiver has no peak).
	BW *BWReport
	// Lat is a latency test's figures (both ends of ib_send_lat and
	// ib_write_lat measure; the client of ib_read_lat).
	Lat *LatStats
	// PeerReport is the report the peer sent in xchg_bw_reports, as it
	// came (a perftest server sends uninitialized memory).
	PeerReport *BWReport

	PeerVersion                    string
	PeerCycleBuffer, PeerCacheLine int
	PeerMTU                        int
	CycleBuffer, CacheLine         int // in use: the larger of both ends'
	Local, Peer                    Dest
	Control, Data                  mpa.Negotiated
	DataIRD, DataORD               int // the data queue pair's, once negotiated
	// DataTries is how many connections a client opened for the data
	// connection: more than one when the server was not listening yet.
	DataTries                           int
	ControlPeer, DataPeer, DataLocalStr string

	// Moved is what this end saw arrive or leave on the data connection:
	// RDMA Writes placed here, Read Responses sent, Sends received, credits.
	Moved Moved
	// Duration is the time from the first control message to the end.
	Duration time.Duration
}

// Moved counts the data the peer moved through this end.
type Moved struct {
	WritesPlaced  int64  // RDMA Write messages placed here (their last segment)
	BytesPlaced   int64  // octets RDMA Writes placed here
	ReadsServed   int64  // RDMA Read Responses sent (their last segment)
	BytesServed   int64  // octets of RDMA Read Responses sent
	SendsReceived int64  // Sends received on the data queue pair
	BytesReceived int64  // their octets
	Credits       uint32 // ib_send_bw's sender: the last credit the receiver wrote
	Checked       int64  // octets compared with the pattern (Config.Pattern)
}

// LatStats are perftest's latency columns, in microseconds.
type LatStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

// session is one end's state.
type session struct {
	cfg    Config
	client bool
	res    *Result
	start  time.Time

	dev *rdmap.Device
	pd  *rdmap.ProtectionDomain
	ctl *ctrl

	ctlConn, dataConn *mpa.Conn
	qp                *rdmap.QueuePair
	scq, rcq          *rdmap.CompletionQueue

	cycle, line int
	// region is the memory the peer reaches (written by the peer's RDMA
	// Writes, read by its RDMA Reads) and, for a client, where its own
	// Writes and Sends come from and its Reads land; advertised in Dest.
	region *rdmap.MemoryRegion
	// src is the source of ib_write_lat's Writes (the region receives
	// the peer's).
	src *rdmap.MemoryRegion
	// credit is ib_send_bw's credit buffer (a uint32), advertised instead
	// of region.
	credit *rdmap.MemoryRegion
	// recvs are the Send tests' receive buffers, one per posted receive.
	recvs []*rdmap.MemoryRegion

	w       *watcher
	checked int64 // octets of receives and Reads compared with the pattern

	local, peer Dest
}

// Region bases: any Tagged Offset will do; distinct ones make captures
// readable.
const (
	regionBase = 0x0000_7e00_0000_0000
	creditBase = 0x0000_7e10_0000_0000
	srcBase    = 0x0000_7e20_0000_0000
)

func newSession(cfg Config, client bool) (*session, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &session{cfg: c, client: client, start: time.Now()}
	s.res = &Result{Test: c.Test, Client: client, Size: c.Size, Iters: c.Iters}
	s.dev = rdmap.NewDevice(rdmap.DeviceConfig{})
	s.pd = s.dev.NewProtectionDomain()
	if s.ctl, err = newCtrl(s.dev, s.pd, client); err != nil {
		return nil, err
	}
	s.w = &watcher{}
	return s, nil
}

// step returns a context for one control step.
func (s *session) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.StepTimeout)
}

func (s *session) exchange(ctx context.Context, what string, msg []byte, want int) ([]byte, error) {
	ctx, cancel := s.step(ctx)
	defer cancel()
	return s.ctl.exchange(ctx, what, msg, want)
}

// preamble runs what every test exchanges first on the control
// connection: exchange_versions, check_sys_data and check_mtu.
func (s *session) preamble(ctx context.Context) error {
	b, err := s.exchange(ctx, "version", AppendVersion(nil, Version), VersionLen)
	if err != nil {
		return err
	}
	vs, v, err := ParseVersion(b)
	if err != nil {
		return fmt.Errorf("perftest: the peer's version: %w", err)
	}
	s.res.PeerVersion = vs
	if v < MinPeerVersion {
		return fmt.Errorf("perftest: the peer is perftest %s; versions older than %.2f exchange other messages", vs, MinPeerVersion)
	}
	b, err = s.exchange(ctx, "cycle buffer", AppendInt(nil, int32(s.cfg.CycleBuffer)), IntLen)
	if err != nil {
		return err
	}
	cycle, _ := ParseInt(b)
	b, err = s.exchange(ctx, "cache line size", AppendInt(nil, int32(s.cfg.CacheLine)), IntLen)
	if err != nil {
		return err
	}
	line, _ := ParseInt(b)
	s.res.PeerCycleBuffer, s.res.PeerCacheLine = int(cycle), int(line)
	if err := checkGeometry(int(cycle), int(line)); err != nil {
		return fmt.Errorf("perftest: the peer's %v", err)
	}
	s.cycle, s.line = max(s.cfg.CycleBuffer, int(cycle)), max(s.cfg.CacheLine, int(line))
	s.res.CycleBuffer, s.res.CacheLine = s.cycle, s.line
	b, err = s.exchange(ctx, "MTU", AppendMTU(nil, s.cfg.MTU), MTULen)
	if err != nil {
		return err
	}
	if s.res.PeerMTU, err = ParseMTU(b); err != nil {
		return fmt.Errorf("perftest: the peer's MTU: %w", err)
	}
	return nil
}

// ErrBudget is wrapped by the error of a session that would need more
// memory than Config.MemoryBudget allows.
var ErrBudget = errors.New("perftest: the session needs more memory than the budget allows")

// need is the memory a test registers at one end with a cycle buffer of
// cycle octets: the region the peer reaches (or a client's buffer), the
// source of ib_write_lat's Writes, and a buffer per receive where Sends
// arrive.
func (c Config) need(cycle int, client bool) int64 {
	region := int64(regionLen(c.Size, cycle))
	n := region
	if c.Test == WriteLat {
		n += region
	}
	if c.Test == SendBW && !client || c.Test == SendLat {
		n += int64(c.RxDepth) * int64(c.Size)
	}
	return n
}

// budget checks the memory the test needs here with the cycle buffer in
// use, the larger of this end's and the peer's.
func (s *session) budget() error {
	c := s.cfg
	if need := c.need(s.cycle, s.client); need > c.MemoryBudget {
		rx := ""
		if c.Test == SendBW || c.Test == SendLat {
			rx = fmt.Sprintf(", an rx depth of %d", c.RxDepth)
		}
		return fmt.Errorf("%w: %s with %d-octet messages%s and a cycle buffer of %d octets (this end's %d, the peer's %d) needs %d octets, the budget is %d",
			ErrBudget, c.Test, c.Size, rx, s.cycle, c.CycleBuffer, s.res.PeerCycleBuffer, need, c.MemoryBudget)
	}
	return nil
}

// resources makes the data queue pair and the memory the test uses, and
// this end's Dest.
func (s *session) resources() error {
	if err := s.budget(); err != nil {
		return err
	}
	c := s.cfg
	s.scq = s.dev.NewCompletionQueue(c.TxDepth + 64)
	s.rcq = s.dev.NewCompletionQueue(c.RxDepth + 16)
	var err error
	n := regionLen(c.Size, s.cycle)
	var access rdmap.Access
	switch {
	case c.Test.reads() && !s.client:
		access = rdmap.RemoteRead
	case c.Test.reads():
		access = rdmap.LocalWrite // the sink of the client's Reads
	case c.Test == WriteLat, c.Test == WriteBW && !s.client:
		access = rdmap.RemoteWrite
	}
	buf := make([]byte, n)
	// The region is the source of a client's Writes and Sends, and of
	// both ends' Sends in ib_send_lat; the server's region of the read
	// tests is what the client reads.
	if c.Pattern && (c.Test.reads() && !s.client || s.client && (c.Test == WriteBW || c.Test == SendBW) || c.Test == SendLat) {
		fill(buf)
	}
	if s.region, err = s.pd.RegisterMemory(buf, regionBase, access); err != nil {
		return err
	}
	if c.Test == WriteLat {
		src := make([]byte, n)
		if c.Pattern {
			fill(src)
		}
		if s.src, err = s.pd.RegisterMemory(src, srcBase, 0); err != nil {
			return err
		}
	}
	s.local = Dest{OutReads: 1, QPN: s.qpn(), PSN: random24()}
	if c.Test.reads() {
		s.local.OutReads = uint32(c.OutReads)
	}
	s.local.RKey, s.local.VAddr = s.region.STag(), s.region.Base()
	if c.Test == SendBW {
		// ctx_alloc_credit: over iWARP both ends of ib_send_bw advertise
		// their credit buffer instead of the data buffer. Only the
		// sender's is written.
		cacc := rdmap.Access(0)
		if s.client {
			cacc = rdmap.RemoteWrite
		}
		if s.credit, err = s.pd.RegisterMemory(make([]byte, CreditLen), creditBase, cacc); err != nil {
			return err
		}
		s.local.RKey, s.local.VAddr = s.credit.STag(), s.credit.Base()
	}
	s.res.Local = s.local
	s.w.setup(s)
	return nil
}

// newDataQP makes the data queue pair (again, for each try of a client's
// data connection).
func (s *session) newDataQP() error {
	c := s.cfg
	ird := 1
	if c.Test.reads() {
		ird = c.OutReads
	}
	qp, err := s.pd.NewQueuePair(rdmap.QPConfig{SendCQ: s.scq, RecvCQ: s.rcq, SendDepth: c.TxDepth + 64,
		RecvDepth: c.RxDepth + 1, IRD: ird, ORD: ird, Observer: s.w})
	if err != nil {
		return err
	}
	// rdma_cm's conn_param: responder_resources and initiator_depth are
	// out_reads for the read tests, 0 otherwise (zero is taken as it is).
	if !c.Test.reads() {
		if err := qp.SetReadLimits(0, 0); err != nil {
			return err
		}
	}
	s.qp = qp
	return nil
}

var qpnSeq atomic.Uint32

// qpn returns a queue pair number for Dest: perftest prints it; iWARP has
// none on the wire.
func (s *session) qpn() uint32 { return 0x100 + qpnSeq.Add(1)&0xffff }

func random24() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & 0xffffff
}

// fill writes the pattern: octet i is i mod 251.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i % 251)
	}
}

// checkPattern returns the index of the first octet of b (at offset off
// of its buffer) that is not the pattern's, or -1.
func checkPattern(b []byte, off int) int {
	for i, v := range b {
		if v != byte((off+i)%251) {
			return i
		}
	}
	return -1
}

// dest exchanges Dest records (ctx_hand_shake): this end's, or a zeroed
// one for the two exchanges around the data connection (perftest sends
// my_dest before set_up_connection has filled it).
func (s *session) dest(ctx context.Context, what string, zero bool) error {
	d := s.local
	if zero {
		d = Dest{}
	}
	b, err := s.exchange(ctx, what, d.Append(nil), DestLen)
	if err != nil {
		return err
	}
	p, err := ParseDest(b)
	if err != nil {
		return err
	}
	if !zero {
		s.peer = p
		s.res.Peer = p
	}
	return nil
}

// dataMPAInfo records the data connection's settings.
func (s *session) connected(conn int, c *mpa.Conn) {
	if conn == 0 {
		s.ctlConn = c
		s.res.Control = c.Negotiated()
		s.res.ControlPeer = c.RemoteAddr().String()
	} else {
		s.dataConn = c
		s.res.Data = c.Negotiated()
		s.res.DataPeer = c.RemoteAddr().String()
		s.res.DataIRD, s.res.DataORD = s.qp.ReadLimits()
	}
}

// finish records what the watcher saw.
func (s *session) finish() {
	s.w.moved(&s.res.Moved)
	s.res.Moved.Checked = s.checked + s.w.checked.Load()
}

// close ends both queue pairs, the data one first (perftest destroys the
// data resources, then the control ones).
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.qp != nil {
		s.qp.Close(ctx)
	}
	s.ctl.qp.Close(ctx)
	s.res.Duration = time.Since(s.start)
}

// dataErr describes a failed completion or wait on the data queue pair.
func (s *session) dataErr(doing string, err error) error {
	if qerr := s.qp.Err(); qerr != nil {
		if errors.Is(qerr, rdmap.ErrDisconnected) {
			return fmt.Errorf("perftest: %s: the peer closed the data connection: %w", doing, qerr)
		}
		return fmt.Errorf("perftest: %s: the data connection failed: %w", doing, qerr)
	}
	return fmt.Errorf("perftest: %s: %w", doing, err)
}

// completion checks a completion's status.
func (s *session) completion(cp rdmap.Completion, doing string) error {
	if cp.Status != rdmap.StatusSuccess {
		if cp.Err != nil {
			return s.dataErr(doing, fmt.Errorf("%v %v: %v", cp.Op, cp.Status, cp.Err))
		}
		return s.dataErr(doing, fmt.Errorf("%v %v", cp.Op, cp.Status))
	}
	return nil
}

// watcher observes the data queue pair's stream: RDMA Writes placed in
// the region (counted and, with Config.Pattern, checked), the credit
// written into the credit buffer, the last octet of a write_lat ping, and
// the Read Responses sent. It runs on the goroutine that placed the
// segment, right after placing it: reading the placed octets there is
// ordered after their placement, which polling the memory from another
// goroutine (as perftest does) would not be.
type watcher struct {
	region, credit *rdmap.MemoryRegion
	pattern        bool
	pingLast       int64 // write_lat: offset of the octet polled, or -1

	writes, placed, reads, served, checked atomic.Int64
	credits                                atomic.Uint32
	creditc                                chan struct{} // a new credit
	pings                                  chan byte     // write_lat: the polled octet's new values

	mu       sync.Mutex
	mismatch error // the first octet that did not match the pattern
}

func (w *watcher) setup(s *session) {
	w.region, w.credit, w.pattern = s.region, s.credit, s.cfg.Pattern
	w.pingLast = -1
	if s.cfg.Test == WriteLat {
		w.pingLast = int64(s.cfg.Size - 1)
	}
	w.creditc = make(chan struct{}, 1)
	w.pings = make(chan byte, 16)
}

// Observe implements trace.Observer.
func (w *watcher) Observe(e trace.Event) {
	switch e.Kind {
	case trace.SegmentPlaced:
		if !e.Tagged || rdmap.Opcode(e.Opcode) != rdmap.OpWrite {
			return
		}
		switch {
		case w.region != nil && e.STag == w.region.STag():
			off := int64(e.TO - w.region.Base())
			if off < 0 || off+int64(e.Len) > int64(w.region.Len()) {
				return // rdmap refused it
			}
			w.placed.Add(int64(e.Len))
			if e.Last {
				w.writes.Add(1)
			}
			b := w.region.Bytes()[off : off+int64(e.Len)]
			chk := b
			if w.pingLast >= off && w.pingLast < off+int64(e.Len) {
				chk = b[:w.pingLast-off] // the ping's counter is not the pattern
			}
			if w.pattern {
				if i := checkPattern(chk, int(off)); i >= 0 {
					w.mu.Lock()
					if w.mismatch == nil {
						w.mismatch = fmt.Errorf("perftest: octet %d of the region is %#02x, the pattern says %#02x", off+int64(i), b[i], byte((int(off)+i)%251))
					}
					w.mu.Unlock()
				} else {
					w.checked.Add(int64(len(chk)))
				}
			}
			if w.pingLast >= off && w.pingLast < off+int64(e.Len) {
				select {
				case w.pings <- b[w.pingLast-off]:
				default:
				}
			}
		case w.credit != nil && e.STag == w.credit.STag():
			off := int64(e.TO - w.credit.Base())
			if off != 0 || e.Len != CreditLen {
				return
			}
			v, _ := ParseCredit(w.credit.Bytes())
			w.credits.Store(v)
			select {
			case w.creditc <- struct{}{}:
			default:
			}
		}
	case trace.SegmentSent:
		if e.Tagged && rdmap.Opcode(e.Opcode) == rdmap.OpReadResponse {
			w.served.Add(int64(e.Len))
			if e.Last {
				w.reads.Add(1)
			}
		}
	}
}

func (w *watcher) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mismatch
}

// moved fills r.Moved from what the watcher saw.
func (w *watcher) moved(m *Moved) {
	m.WritesPlaced, m.BytesPlaced = w.writes.Load(), w.placed.Load()
	m.ReadsServed, m.BytesServed = w.reads.Load(), w.served.Load()
	m.Credits = w.credits.Load()
}
