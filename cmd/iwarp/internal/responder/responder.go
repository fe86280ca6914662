// Package responder is the responder of "iwarp serve": for each
// connection it registers a memory region with remote read and write
// rights, filled with byte(i % 251) at Tagged Offset TO, posts receive
// buffers and reposts each as it completes, advertises the region in the
// private data of its Accept (and, with Config.AdvertiseSend, in a first
// Send), and reports what arrives as events: each Send received (its MSN,
// length, SHA-256 and any STag it invalidated), each Terminate, a dead
// peer, an idle close, and the region's final SHA-256.
//
//	log := responder.NewLog(os.Stdout, true) // JSON lines
//	err := responder.Serve(ctx, dev, req, id, &responder.Config{MRSize: 1 << 20, RecvDepth: 16, RecvSize: 65536}, log)
//
// The transport is the caller's: a Request is a connection waiting for
// its queue pair.
package responder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

// TO is the Tagged Offset of the first octet of each served region.
const TO = 0x10000

// Config is what Serve holds for each connection.
type Config struct {
	MRSize    int // octets of the region
	RecvDepth int // receive buffers posted
	RecvSize  int // octets of each receive buffer
	// IdleTimeout closes a connection on which nothing has arrived or
	// left for that long (0: never).
	IdleTimeout time.Duration
	// AdvertiseSend also Sends the region's descriptor as the first
	// message.
	AdvertiseSend bool
	// Show, if set, is told of each connection's region as it is
	// registered; it returns an observer of the connection's events and
	// what to call when the connection ends (a demo watching).
	Show func(name string, mr *rdmap.MemoryRegion) (trace.Observer, func())
}

// ConnBytes is what one connection holds in regions and buffers.
func (c *Config) ConnBytes() int64 {
	return int64(c.MRSize) + int64(c.RecvDepth)*int64(c.RecvSize) + 16
}

// A Request is a connection waiting for its queue pair.
type Request interface {
	// Accept starts qp on the connection, answering with privateData.
	Accept(ctx context.Context, qp *rdmap.QueuePair, privateData []byte) (Conn, error)
	// Reject refuses the connection.
	Reject()
}

// A Conn is an accepted connection.
type Conn interface {
	// Info describes the connection: its JSON fields go into the
	// "connected" event, its String into the line of text.
	Info() fmt.Stringer
	// PeerDead says, once the stream has stopped, whether the peer was
	// found dead, and when.
	PeerDead() (at time.Time, err error, ok bool)
	// Close closes the connection, draining what is queued until ctx
	// ends.
	Close(ctx context.Context)
}

// DeadTime is how an event's text gives the time a peer was found dead.
const DeadTime = "15:04:05.000"

// Log writes events as JSON lines or as text, one at a time.
type Log struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

// NewLog returns a Log writing to w: JSON lines, or lines of text.
func NewLog(w io.Writer, asJSON bool) *Log { return &Log{w: w, json: asJSON} }

// Emit writes one event: v (a map or struct with an "event" field) as
// JSON, or text as a line.
func (l *Log) Emit(v any, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		b, _ := json.Marshal(v)
		l.w.Write(append(b, '\n'))
		return
	}
	fmt.Fprintln(l.w, text)
}

// Serve runs connection id of req until it ends or ctx is done.
func Serve(ctx context.Context, dev *rdmap.Device, req Request, id int, cfg *Config, log *Log) error {
	s, err := newServed(dev, cfg, id, log)
	if err != nil {
		req.Reject()
		return err
	}
	defer s.deregister()
	observer := trace.Observer(s)
	if cfg.Show != nil {
		shown, gone := cfg.Show(fmt.Sprintf("serve connection %d", id), s.mr)
		defer gone()
		observer = trace.Func(func(e trace.Event) {
			s.Observe(e)
			shown.Observe(e)
		})
	}
	scq, rcq := dev.NewCompletionQueue(64), dev.NewCompletionQueue(cfg.RecvDepth+1)
	qp, err := s.pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq, RecvDepth: cfg.RecvDepth, Observer: observer})
	if err != nil {
		req.Reject()
		return err
	}
	for i := range s.bufs {
		if err := s.post(qp, i); err != nil {
			req.Reject()
			return err
		}
	}
	c, err := req.Accept(ctx, qp, s.adv.Bytes())
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		qp.Close(closeCtx)
		cancel()
		return err
	}
	s.connected(c)
	if cfg.AdvertiseSend {
		if err := qp.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: s.adv, Length: 16}}}); err != nil {
			log.Emit(map[string]any{"event": "error", "conn": id, "error": err.Error()}, fmt.Sprintf("conn %d: advertising the region: %v", id, err))
		}
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cp, err := rcq.Wait(rctx)
			if err != nil {
				return
			}
			s.received(qp, cp)
		}
	}()
	select {
	case <-qp.Terminated():
		if at, err, ok := c.PeerDead(); ok {
			log.Emit(map[string]any{"event": "peer_dead", "conn": id, "at": at.UTC().Format(time.RFC3339Nano), "error": err.Error()},
				fmt.Sprintf("conn %d: peer dead at %s: %v", id, at.Format(DeadTime), err))
		}
	case <-ctx.Done():
	case <-s.idle(rctx):
		log.Emit(map[string]any{"event": "idle", "conn": id}, fmt.Sprintf("conn %d: closing: nothing moved for %v", id, cfg.IdleTimeout))
	}
	cancel()
	<-done
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Second)
	c.Close(closeCtx)
	cancelClose()
	var rest [64]rdmap.Completion
	for {
		k := rcq.Poll(rest[:])
		if k == 0 {
			break
		}
		for _, cp := range rest[:k] {
			s.received(qp, cp)
		}
	}
	sum := sha256.Sum256(s.mr.Bytes())
	log.Emit(map[string]any{"event": "closed", "conn": id, "mr_sha256": hex.EncodeToString(sum[:])},
		fmt.Sprintf("conn %d: closed; region sha256 %x", id, sum))
	return nil
}

// served is what Serve holds for one connection.
type served struct {
	cfg  *Config
	id   int
	log  *Log
	pd   *rdmap.ProtectionDomain
	mr   *rdmap.MemoryRegion   // the region served
	bufs []*rdmap.MemoryRegion // the receive buffers
	adv  *rdmap.MemoryRegion   // the region's descriptor

	active atomic.Int64 // when something last arrived or left, in Unix nanoseconds
	// The MSN of each delivered untagged Send message, in order: its
	// receive completion follows.
	msnMu sync.Mutex
	msns  []uint32
}

func newServed(dev *rdmap.Device, cfg *Config, id int, log *Log) (*served, error) {
	s := &served{cfg: cfg, id: id, log: log, pd: dev.NewProtectionDomain()}
	s.active.Store(time.Now().UnixNano())
	// What the connection registers, and nothing more.
	s.pd.SetLimits(cfg.RecvDepth+2, cfg.ConnBytes())
	mem := make([]byte, cfg.MRSize)
	for i := range mem {
		mem[i] = byte(i % 251)
	}
	var err error
	if s.mr, err = s.pd.RegisterMemory(mem, TO, rdmap.RemoteRead|rdmap.RemoteWrite|rdmap.LocalWrite); err != nil {
		return nil, err
	}
	for range cfg.RecvDepth {
		b, err := s.pd.RegisterMemory(make([]byte, cfg.RecvSize), 0, rdmap.LocalWrite)
		if err != nil {
			s.deregister()
			return nil, err
		}
		s.bufs = append(s.bufs, b)
	}
	if s.adv, err = s.pd.RegisterMemory(make([]byte, 16), 0, 0); err != nil {
		s.deregister()
		return nil, err
	}
	s.mr.Remote().Append(s.adv.Bytes()[:0])
	return s, nil
}

func (s *served) deregister() {
	for _, mr := range append([]*rdmap.MemoryRegion{s.mr, s.adv}, s.bufs...) {
		if mr != nil {
			mr.Deregister()
		}
	}
}

func (s *served) post(qp *rdmap.QueuePair, i int) error {
	return qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: s.bufs[i], Length: uint32(s.cfg.RecvSize)}}})
}

// Observe notes activity, the MSN of each Send delivered, and logs
// Terminates.
func (s *served) Observe(e trace.Event) {
	if e.Kind == trace.SegmentSent || e.Kind == trace.SegmentPlaced {
		s.active.Store(time.Now().UnixNano())
	}
	switch e.Kind {
	case trace.MessageDelivered:
		if !e.Tagged && e.QN == rdmap.QNSend {
			s.msnMu.Lock()
			s.msns = append(s.msns, e.MSN)
			s.msnMu.Unlock()
		}
	case trace.Terminate:
		if e.Err != nil {
			s.terminated(e.Err)
		}
	}
}

func (s *served) connected(c Conn) {
	info := c.Info()
	ev := map[string]any{}
	if b, err := json.Marshal(info); err == nil {
		json.Unmarshal(b, &ev)
	}
	ev["event"], ev["conn"], ev["stag"], ev["to"], ev["length"] = "connected", s.id, s.mr.STag(), TO, s.cfg.MRSize
	s.log.Emit(ev, fmt.Sprintf("conn %d: connected: %v; region STag %#08x TO %#x length %d", s.id, info, s.mr.STag(), uint64(TO), s.cfg.MRSize))
}

// received reports a receive completion and reposts its buffer.
func (s *served) received(qp *rdmap.QueuePair, cp rdmap.Completion) {
	if cp.Status != rdmap.StatusSuccess || cp.Op != rdmap.WorkRecv {
		return
	}
	s.msnMu.Lock()
	var msn uint32
	if len(s.msns) > 0 {
		msn, s.msns = s.msns[0], s.msns[1:]
	}
	s.msnMu.Unlock()
	i := int(cp.WRID)
	sum := sha256.Sum256(s.bufs[i].Bytes()[:cp.ByteLen])
	ev := struct {
		Event       string  `json:"event"`
		Conn        int     `json:"conn"`
		MSN         uint32  `json:"msn"`
		Len         uint32  `json:"len"`
		SHA256      string  `json:"sha256"`
		Invalidated *uint32 `json:"invalidated_stag,omitempty"`
	}{"recv", s.id, msn, cp.ByteLen, hex.EncodeToString(sum[:]), nil}
	text := fmt.Sprintf("conn %d: received Send MSN %d, %d bytes, sha256 %x", s.id, msn, cp.ByteLen, sum[:8])
	if cp.Flags&rdmap.FlagInvalidated != 0 {
		stag := cp.InvalidatedSTag
		ev.Invalidated = &stag
		text += fmt.Sprintf(", invalidated STag %#08x", stag)
	}
	s.log.Emit(ev, text)
	s.post(qp, i)
}

func (s *served) terminated(e *term.Error) {
	origin := "local"
	if e.Remote {
		origin = "remote"
	}
	ev := map[string]any{"event": "terminate", "conn": s.id, "origin": origin,
		"layer": uint8(e.Layer), "etype": e.EType, "ecode": e.Code,
		"layer_name": e.Layer.String(), "name": e.Name()}
	if e.Detail != "" {
		ev["detail"] = e.Detail
	}
	s.log.Emit(ev, fmt.Sprintf("conn %d: Terminate (%s): %s %s", s.id, origin, e.Layer, e.Name()))
}

// idle is closed once nothing has arrived or left for IdleTimeout (never
// without one); its watcher ends with ctx.
func (s *served) idle(ctx context.Context) <-chan struct{} {
	idle := make(chan struct{})
	if s.cfg.IdleTimeout <= 0 {
		return idle
	}
	go func() {
		t := time.NewTicker(s.cfg.IdleTimeout / 4)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if time.Since(time.Unix(0, s.active.Load())) >= s.cfg.IdleTimeout {
					close(idle)
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return idle
}
