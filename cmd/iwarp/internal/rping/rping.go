// Package rping speaks the application protocol of rdma-core's rping
// (librdmacm/examples/rping.c, rdma-core v44) over an rdmap queue pair, so
// that a Go peer can ping a stock rping and be pinged by one.
//
// One connection carries the whole exchange. Each side posts one receive
// buffer of 16 octets before it connects and posts it again after each
// receive completes. For each ping:
//
//  1. the client fills its source buffer with the ping's data (Fill) and
//     Sends an Info naming it (STag, Tagged Offset, size);
//  2. the server RDMA Reads the source buffer into its own buffer;
//  3. the server Sends "go ahead" (16 octets, rping sends zeros);
//  4. the client Sends an Info naming its sink buffer;
//  5. the server RDMA Writes the data it read, up to and including its
//     first NUL (rping's strlen + 1), into the sink;
//  6. the server Sends "done" (16 octets).
//
// The client then compares source and sink (rping -V) and prints the sink
// (rping -v: "ping data: ..."); the server prints what it read (rping -v:
// "server ping data: ..."). After Count pings the client disconnects; the
// server sees the disconnect and ends without error, as rping's does.
//
// The caller creates the resources (NewEndpoint), the client or server on
// them (NewClient, NewServer: this registers the buffers and posts the
// receive), connects the queue pair with a transport (mpa.Dial,
// mpa.Listener, sctpddp) and then calls Run, which ends by closing the
// queue pair.
package rping

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/iwarpgo/iwarp/rdmap"
)

// rping's constants.
const (
	// DefaultPort is rping's port (-p).
	DefaultPort = 7174
	// DefaultSize is rping's ping data size (-S).
	DefaultSize = 64
	// MinSize is RPING_MIN_BUFSIZE: sizeof(stringify(INT_MAX)) +
	// sizeof(RPING_MSG_FMT), 11 + 15 octets.
	MinSize = 26
	// MaxSize is RPING_BUFSIZE - 1, the largest -S rping accepts.
	MaxSize = 64*1024 - 1
	// InfoLen is the length of struct rping_rdma_info.
	InfoLen = 16
	// SendDepth is RPING_SQ_DEPTH, the send queue's depth.
	SendDepth = 16
	// RecvDepth is rping's max_recv_wr (it posts one buffer at a time).
	RecvDepth = 2
	// CQDepth is rping's completion queue: RPING_SQ_DEPTH * 2.
	CQDepth = 2 * SendDepth
	// DefaultIRD and DefaultORD are rping's rdma_conn_param
	// (responder_resources and initiator_depth).
	DefaultIRD, DefaultORD = 1, 1
)

// Info is struct rping_rdma_info, the 16 octets each Send of the client
// carries, in network byte order:
//
//	struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; };
//
// Buf is the buffer's address, which is its Tagged Offset; RKey its STag.
type Info struct {
	Buf  uint64
	RKey uint32
	Size uint32
}

// Append appends the wire form of i to b.
func (i Info) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, i.Buf)
	b = binary.BigEndian.AppendUint32(b, i.RKey)
	return binary.BigEndian.AppendUint32(b, i.Size)
}

// ParseInfo decodes an Info from exactly InfoLen octets, as rping accepts
// a receive only of that length ("Received bogus data, size %d").
func ParseInfo(b []byte) (Info, error) {
	if len(b) != InfoLen {
		return Info{}, fmt.Errorf("rping: received bogus data, size %d (want %d)", len(b), InfoLen)
	}
	return Info{Buf: binary.BigEndian.Uint64(b), RKey: binary.BigEndian.Uint32(b[8:]), Size: binary.BigEndian.Uint32(b[12:])}, nil
}

func (i Info) String() string {
	return fmt.Sprintf("rkey %x addr %x len %d", i.RKey, i.Buf, i.Size)
}

// Fill writes the data of ping number ping into buf as rping's client
// does: "rdma-ping-%d: ", then the letters from 'A'+ping%58 on, cycling
// through octets 65 to 122, and a NUL in the last octet.
func Fill(buf []byte, ping int) {
	if len(buf) == 0 {
		return
	}
	// snprintf(buf, size, "rdma-ping-%d: ", ping): truncated to size-1
	// octets and a NUL; cc is the untruncated length.
	s := "rdma-ping-" + strconv.Itoa(ping) + ": "
	n := copy(buf[:len(buf)-1], s)
	buf[n] = 0
	c := byte(65 + ping%58)
	for i := len(s); i < len(buf); i++ {
		buf[i] = c
		c++
		if c > 122 {
			c = 65
		}
	}
	buf[len(buf)-1] = 0
}

// CString returns b up to its first NUL, as printf's %s prints a buffer.
func CString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// Config is what rping's flags set for one connection.
type Config struct {
	// Size is the ping data size (-S), MinSize to MaxSize; 0 means
	// DefaultSize. The client's buffers have this size and it advertises
	// it; the server's buffer has it, and a client that advertises more
	// is an error (rping's RDMA Read would fail).
	Size int
	// Count is the number of pings (-C) of a client; 0 pings until the
	// context ends. A server serves until the client disconnects.
	Count int
	// Validate compares the data (-V): the client its sink with its
	// source, as rping does; the server (an addition) what it read with
	// what rping's client fills in (Fill).
	Validate bool
	// Verbose, if set, gets rping -v's lines: "ping data: %s\n" (client)
	// and "server ping data: %s\n" (server).
	Verbose io.Writer
	// Debug, if set, gets lines like rping -d's.
	Debug io.Writer
}

func (c *Config) size() int {
	if c.Size == 0 {
		return DefaultSize
	}
	return c.Size
}

// CheckSize reports whether size is one rping accepts for -S, with
// rping's message otherwise.
func CheckSize(size int) error {
	if size < MinSize || size > MaxSize {
		return fmt.Errorf("invalid size %d (valid range is %d to %d)", size, MinSize, MaxSize)
	}
	return nil
}

// Endpoint is one side's verbs resources, set up as rping sets up its
// own: one completion queue for both queues.
type Endpoint struct {
	PD *rdmap.ProtectionDomain
	CQ *rdmap.CompletionQueue
	QP *rdmap.QueuePair
}

// NewEndpoint creates a protection domain on dev, a completion queue of
// CQDepth entries and a queue pair with SendDepth and RecvDepth, whose IRD
// and ORD are ird and ord (rping asks DefaultIRD and DefaultORD; 0 is
// allowed). The transport negotiates them with the peer's.
func NewEndpoint(dev *rdmap.Device, ird, ord int) (*Endpoint, error) {
	if ird < 0 || ord < 0 {
		return nil, fmt.Errorf("rping: IRD and ORD must not be negative (%d, %d)", ird, ord)
	}
	pd := dev.NewProtectionDomain()
	cq := dev.NewCompletionQueue(CQDepth)
	// A queue pair's IRD and ORD can be set down to 0 but not from 0
	// (QPConfig's zero means the default): configure at least 1.
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq,
		SendDepth: SendDepth, RecvDepth: RecvDepth, IRD: max(ird, 1), ORD: max(ord, 1)})
	if err != nil {
		return nil, err
	}
	if err := qp.SetReadLimits(ird, ord); err != nil {
		return nil, err
	}
	return &Endpoint{PD: pd, CQ: cq, QP: qp}, nil
}

// Tagged Offsets of the registered buffers; rping uses their addresses.
const (
	recvTO  = 0x1000
	sendTO  = 0x2000
	rdmaTO  = 0x100000
	startTO = 0x200000
)

// peer is what the client and the server share: the buffers and the
// completion handling.
type peer struct {
	ep     *Endpoint
	cfg    Config
	size   int
	recvMR *rdmap.MemoryRegion // rping's recv_buf
	sendMR *rdmap.MemoryRegion // rping's send_buf
	rdmaMR *rdmap.MemoryRegion // rping's rdma_buf: the server's RDMA source and sink, the client's sink
}

func newPeer(ep *Endpoint, cfg Config) (*peer, error) {
	p := &peer{ep: ep, cfg: cfg, size: cfg.size()}
	if err := CheckSize(p.size); err != nil {
		return nil, fmt.Errorf("rping: %v", err)
	}
	var err error
	if p.recvMR, err = ep.PD.RegisterMemory(make([]byte, InfoLen), recvTO, rdmap.LocalWrite); err != nil {
		return nil, err
	}
	if p.sendMR, err = ep.PD.RegisterMemory(make([]byte, InfoLen), sendTO, 0); err != nil {
		return nil, err
	}
	if p.rdmaMR, err = ep.PD.RegisterMemory(make([]byte, p.size), rdmaTO,
		rdmap.LocalWrite|rdmap.RemoteRead|rdmap.RemoteWrite); err != nil {
		return nil, err
	}
	if err := p.postRecv(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *peer) debugf(format string, args ...any) {
	if p.cfg.Debug != nil {
		fmt.Fprintf(p.cfg.Debug, format, args...)
	}
}

// Work request IDs.
const (
	wrRecv = iota + 1
	wrSend
	wrRDMA
)

func (p *peer) postRecv() error {
	return p.posted(p.ep.QP.PostRecv(rdmap.RecvWR{ID: wrRecv, SGL: []rdmap.SGE{{MR: p.recvMR, Length: InfoLen}}}))
}

// send Sends the 16 octets of send_buf (inline: the buffer is reused).
func (p *peer) send() error {
	return p.posted(p.ep.QP.PostSend(rdmap.SendWR{ID: wrSend, SGL: []rdmap.SGE{{MR: p.sendMR, Length: InfoLen}}, Inline: true}))
}

// posted turns a post refused because the stream has stopped into the
// reason it stopped (the peer disconnected, a Terminate).
func (p *peer) posted(err error) error {
	if errors.Is(err, rdmap.ErrNotRunning) {
		if qerr := p.ep.QP.Err(); qerr != nil {
			return qerr
		}
	}
	return err
}

// wait returns the next completion of the operation op, taking the
// completions of Sends (which rping only logs) on the way. A completion
// in error ends it: the queue pair's error when the stream stopped.
func (p *peer) wait(ctx context.Context, op rdmap.WorkOp) (rdmap.Completion, error) {
	for {
		c, err := p.ep.CQ.Wait(ctx)
		if err != nil {
			return c, err
		}
		if c.Status != rdmap.StatusSuccess {
			if c.Status == rdmap.StatusWRFlushErr {
				if err := p.ep.QP.Err(); err != nil {
					return c, err
				}
				return c, fmt.Errorf("rping: %v flushed", c.Op)
			}
			if c.Err != nil {
				return c, fmt.Errorf("rping: %v completion failed: %v: %w", c.Op, c.Status, c.Err)
			}
			return c, fmt.Errorf("rping: %v completion failed: %v", c.Op, c.Status)
		}
		switch c.Op {
		case rdmap.WorkSend:
			p.debugf("send completion\n")
		case rdmap.WorkRecv:
			p.debugf("recv completion\n")
		case rdmap.WorkRead:
			p.debugf("rdma read completion\n")
		case rdmap.WorkWrite:
			p.debugf("rdma write completion\n")
		}
		if c.Op == op {
			return c, nil
		}
		if c.Op != rdmap.WorkSend {
			return c, fmt.Errorf("rping: unexpected %v completion while waiting for %v", c.Op, op)
		}
	}
}

// recv waits for the next receive, decodes it and posts the buffer again
// (rping reposts in its completion handler).
func (p *peer) recv(ctx context.Context) (Info, error) {
	c, err := p.wait(ctx, rdmap.WorkRecv)
	if err != nil {
		return Info{}, err
	}
	info, err := ParseInfo(p.recvMR.Bytes()[:c.ByteLen])
	if err != nil {
		return Info{}, err
	}
	if err := p.postRecv(); err != nil {
		return Info{}, err
	}
	return info, nil
}

// close disconnects: Close drains what is queued and closes the
// transport (a TCP FIN, an SCTP session's end).
func (p *peer) close(ctx context.Context) {
	p.ep.QP.Close(ctx)
}

// Client is rping's client side.
type Client struct {
	peer
	startMR *rdmap.MemoryRegion // rping's start_buf: the RDMA Read source
	pings   int
}

// NewClient registers the client's buffers on ep and posts its receive:
// call it before connecting ep.QP.
func NewClient(ep *Endpoint, cfg Config) (*Client, error) {
	p, err := newPeer(ep, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{peer: *p}
	if c.startMR, err = ep.PD.RegisterMemory(make([]byte, c.size), startTO,
		rdmap.LocalWrite|rdmap.RemoteRead|rdmap.RemoteWrite); err != nil {
		return nil, err
	}
	return c, nil
}

// Source and Sink return the Infos the client advertises for its source
// and sink buffers (for tests that speak rping's protocol by hand).
func (c *Client) Source() Info {
	return Info{Buf: c.startMR.Base(), RKey: c.startMR.STag(), Size: uint32(c.size)}
}

func (c *Client) Sink() Info {
	return Info{Buf: c.rdmaMR.Base(), RKey: c.rdmaMR.STag(), Size: uint32(c.size)}
}

// Pings returns the number of pings completed.
func (c *Client) Pings() int { return c.pings }

// advertise Sends info, as rping_format_send and ibv_post_send do.
func (c *Client) advertise(info Info) error {
	info.Append(c.sendMR.Bytes()[:0])
	c.debugf("RDMA addr %x rkey %x len %d\n", info.Buf, info.RKey, info.Size)
	return c.send()
}

// ErrMismatch is the client's "data mismatch!": the sink differs from the
// source after a ping (Validate).
var ErrMismatch = errors.New("rping: data mismatch")

// Run pings Count times (until ctx ends when Count is 0) on the connected
// queue pair, then disconnects. It returns nil when every ping completed
// (and, with Validate, came back intact).
func (c *Client) Run(ctx context.Context) error {
	defer c.close(ctx)
	start, sink := c.startMR.Bytes(), c.rdmaMR.Bytes()
	for ping := 0; c.cfg.Count == 0 || ping < c.cfg.Count; ping++ {
		Fill(start, ping)
		if err := c.advertise(c.Source()); err != nil {
			return c.failed(err)
		}
		// Wait for the server's "go ahead" (its RDMA Read completed).
		if _, err := c.recv(ctx); err != nil {
			return c.failed(err)
		}
		if err := c.advertise(c.Sink()); err != nil {
			return c.failed(err)
		}
		// Wait for the server to say its RDMA Write is complete.
		if _, err := c.recv(ctx); err != nil {
			return c.failed(err)
		}
		if c.cfg.Validate && !bytes.Equal(start, sink) {
			return fmt.Errorf("%w in ping %d: sent %q, got back %q", ErrMismatch, ping, CString(start), CString(sink))
		}
		if c.cfg.Verbose != nil {
			fmt.Fprintf(c.cfg.Verbose, "ping data: %s\n", CString(sink))
		}
		c.pings++
	}
	return nil
}

func (c *Client) failed(err error) error {
	if errors.Is(err, rdmap.ErrDisconnected) {
		return fmt.Errorf("rping: the server disconnected after %d pings: %w", c.pings, err)
	}
	return fmt.Errorf("rping: ping %d: %w", c.pings, err)
}

// Server is rping's server side for one connection.
type Server struct {
	peer
	pings int
}

// NewServer registers the server's buffers on ep and posts its receive:
// call it before accepting the connection on ep.QP.
func NewServer(ep *Endpoint, cfg Config) (*Server, error) {
	p, err := newPeer(ep, cfg)
	if err != nil {
		return nil, err
	}
	return &Server{peer: *p}, nil
}

// Pings returns the number of pings served.
func (s *Server) Pings() int { return s.pings }

// Run serves pings on the connected queue pair until the client
// disconnects, which ends it with nil (as rping's server exits 0), then
// disconnects. Any other end of the stream (a Terminate, a lost
// connection, ctx) is an error.
func (s *Server) Run(ctx context.Context) error {
	defer s.close(ctx)
	err := s.serve(ctx)
	if errors.Is(err, rdmap.ErrDisconnected) {
		return nil
	}
	return err
}

func (s *Server) serve(ctx context.Context) error {
	qp, buf := s.ep.QP, s.rdmaMR.Bytes()
	for ; ; s.pings++ {
		// Wait for the client's source STag/TO/length.
		src, err := s.recv(ctx)
		if err != nil {
			return err
		}
		s.debugf("Received %v from peer\n", src)
		if src.Size > uint32(len(buf)) { // compared as uint32: an int is 32 bits on some builds
			return fmt.Errorf("rping: ping %d: the client's buffer is %d octets, larger than this server's %d (-S)", s.pings, src.Size, len(buf))
		}
		err = s.posted(qp.PostRead(rdmap.ReadWR{ID: wrRDMA, Local: rdmap.SGE{MR: s.rdmaMR, Length: src.Size},
			RemoteSTag: src.RKey, RemoteTO: src.Buf}))
		if err != nil {
			return err
		}
		s.debugf("server posted rdma read req \n")
		if _, err := s.wait(ctx, rdmap.WorkRead); err != nil {
			return err
		}
		s.debugf("server received read complete\n")
		data := buf[:src.Size]
		if s.cfg.Verbose != nil {
			fmt.Fprintf(s.cfg.Verbose, "server ping data: %s\n", CString(data))
		}
		if s.cfg.Validate {
			want := make([]byte, len(data))
			Fill(want, s.pings)
			if !bytes.Equal(data, want) {
				return fmt.Errorf("%w in ping %d: read %q, rping's client fills %q", ErrMismatch, s.pings, CString(data), CString(want))
			}
		}
		// Tell the client to continue.
		if err := s.send(); err != nil {
			return err
		}
		s.debugf("server posted go ahead\n")

		// Wait for the client's sink STag/TO/length.
		sink, err := s.recv(ctx)
		if err != nil {
			return err
		}
		s.debugf("Received %v from peer\n", sink)
		// Echo the data: strlen(rdma_buf) + 1 octets.
		n := len(CString(buf)) + 1
		if n > len(buf) {
			n = len(buf)
		}
		err = s.posted(qp.PostWrite(rdmap.WriteWR{ID: wrRDMA, SGL: []rdmap.SGE{{MR: s.rdmaMR, Length: uint32(n)}},
			RemoteSTag: sink.RKey, RemoteTO: sink.Buf}))
		if err != nil {
			return err
		}
		s.debugf("rdma write from lkey %x laddr %x len %d\n", s.rdmaMR.STag(), s.rdmaMR.Base(), n)
		if _, err := s.wait(ctx, rdmap.WorkWrite); err != nil {
			return err
		}
		s.debugf("server rdma write complete \n")
		// Tell the client to begin again.
		if err := s.send(); err != nil {
			return err
		}
		s.debugf("server posted go ahead\n")
	}
}
