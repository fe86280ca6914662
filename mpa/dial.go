//go:build !js

package mpa

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// rtrWrite is the zero-length RDMA Write used as the RTR indication (RFC
// 6581 §9.2): a tagged DDP header, T=1 L=1 DV=1, RDMAP control RV=1 opcode
// 0, STag 0, TO 0. "The STag and TO fields MUST NOT be checked for a
// zero-length Tagged DDP Message." (RFC 5041 §5.2)
var rtrWrite = []byte{0xc1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// Dial connects to an MPA responder at addr as the Initiator (RFC 5044
// §7.1.2 rules 1 and 3): it sends the MPA Request Frame, validates the
// Reply, negotiates CRCs, Markers, IRD/ORD and the RTR indication (RFC
// 6581), and starts ep on the connection. ctx bounds the whole startup.
func Dial(ctx context.Context, network, addr string, ep ddp.Endpoint, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c, err := initiate(ctx, nc, ep, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func initiate(ctx context.Context, nc net.Conn, ep ddp.Endpoint, cfg *Config) (*Conn, error) {
	done := deadline(ctx, nc, cfg.timeout())
	defer done()
	if cfg.TLS != nil {
		tc := tls.Client(nc, cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("mpa: TLS handshake: %w", err)
		}
		nc = tc
	}
	if cfg.Trace != nil {
		nc = tracedConn{nc, cfg.Trace}
	}
	req := Frame{Markers: cfg.Markers, CRC: !cfg.NoCRC, Rev: uint8(cfg.revision()), PrivateData: cfg.PrivateData}
	var mine EnhancedData
	if cfg.revision() >= 2 {
		mine = enhancedFor(ep)
		if !cfg.ClientServer {
			// This initiator can send a zero-length RDMA Write as its RTR
			// indication: "The initiator MUST set each Control Flag B, C,
			// and D to 1 for each of the options it supports, if Control
			// Flag A is set to 1." (RFC 6581 §9.2)
			mine.PeerToPeer, mine.WriteRTR = true, true
		}
		req.Enhanced = true
		req.PrivateData = append(mine.Append(nil), cfg.PrivateData...)
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := nc.Write(req.Append(nil)); err != nil {
		return nil, fmt.Errorf("mpa: sending the MPA Request Frame: %w", err)
	}
	rep, err := ReadFrame(nc)
	if err != nil {
		return nil, fmt.Errorf("mpa: waiting for the MPA Reply Frame: %w", err)
	}
	if !rep.Reply {
		// "MPA implementations MUST use the difference between the MPA
		// Request Frame and the MPA Reply Frame to check for incorrect
		// 'Initiator/Initiator' startups." (rule 8)
		return nil, invalidFrame("an MPA Request Frame came back: both ends started as Initiator")
	}
	if rep.Rev > req.Rev {
		return nil, invalidFrame("the Reply has Rev %d, the Request Rev %d", rep.Rev, req.Rev)
	}
	if req.Enhanced && !rep.Enhanced {
		// "If the responder receives an enhanced MPA message, it MUST
		// respond with an enhanced MPA message." (RFC 6581 §10)
		return nil, invalidFrame("an unenhanced Reply to an enhanced Request")
	}
	theirs, ulp, enhanced := rep.Enhancement()
	if rep.Reject {
		re := &RejectedError{PrivateData: append([]byte(nil), ulp...)}
		if enhanced {
			re.Enhanced = &theirs
		}
		return nil, re
	}
	fromInit, fromResp := Negotiate(&req, &rep)
	neg := Negotiated{Revision: int(rep.Rev), CRC: fromInit.CRC, MarkersTx: fromInit.Markers, MarkersRx: fromResp.Markers,
		PeerData: append([]byte(nil), ulp...)}
	var fail *term.Error
	if enhanced {
		neg.PeerIRDORD, neg.LocalIRDORD = &theirs, &mine
		ird, ord := ep.ReadLimits()
		// "the initiator MUST set its IRD at least to the responder ORD and
		// its ORD at most to the responder IRD." (RFC 6581 §9.1)
		if theirs.IRD != IRDORDAuto && int(theirs.IRD) < ord {
			if err := ep.SetORD(int(theirs.IRD)); err != nil {
				return nil, err
			}
		}
		if theirs.ORD != IRDORDAuto && int(theirs.ORD) > ird {
			fail = term.MPAInsufficientIRD.With("the responder's ORD %d exceeds this end's IRD %d", theirs.ORD, ird)
		}
		if mine.PeerToPeer {
			neg.PeerToPeer = true
			switch {
			case !theirs.PeerToPeer:
				// "If Control Flag A is 1 in the MPA Request message, then
				// the responder MUST set Control Flag A to 1".
				return nil, invalidFrame("the Reply answers a peer-to-peer Request with Control Flag A 0")
			case theirs.WriteRTR:
				neg.RTR = "write"
			default:
				// "If the initiator is not able to generate any of the
				// responder-supported RTR indications, then it MUST send a
				// TERM message ... Layer 2, Error Type 0, Error Code 7."
				fail = term.MPANoMatchingRTR.With("the responder supports no RTR indication this end can send (%v)", theirs)
			}
		}
	}
	fromInit.MaxULPDU = maxSend(nc, fromInit.Markers)
	c := newConn(nc, ep, neg, fromInit, fromResp, false)
	if neg.RTR == "write" && fail == nil {
		// "The RDMA connection initiator MUST NOT allow any later FULPDUs
		// to be transmitted before the RTR indication."
		if err := c.w.WriteFPDU(rtrWrite, nil); err != nil {
			return nil, err
		}
	}
	if err := c.run(); err != nil {
		return nil, err
	}
	if fail != nil {
		ep.Stream().Fail(fail)
		<-ep.Terminated()
		c.Close()
		return nil, fail
	}
	return c, nil
}

// DefaultPending is how many connections may wait for the ULP's decision.
const DefaultPending = 16

// Listener accepts MPA connections as the Responder.
type Listener struct {
	ln      net.Listener
	cfg     Config
	pending chan *Request
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// Listen listens for TCP connections on addr and runs the Responder's
// side of the startup on each: it waits, with a timeout, for a valid MPA
// Request Frame (RFC 5044 §7.1.2 rules 2, 8, 10), and hands the request to
// Accept. A connection whose Request is improperly formatted is closed.
func Listen(network, addr string, cfg *Config) (*Listener, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{ln: ln, cfg: *cfg, pending: make(chan *Request, DefaultPending), done: make(chan struct{})}
	l.wg.Add(1)
	go l.loop()
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening; connections already accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.ln.Close()
	})
	l.wg.Wait()
	for {
		select {
		case r := <-l.pending:
			r.nc.Close()
		default:
			return nil
		}
	}
}

func (l *Listener) loop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r, err := l.startup(nc)
			if err != nil {
				nc.Close()
				return
			}
			select {
			case l.pending <- r:
			default:
				nc.Close() // too many waiting for the ULP
			}
		}()
	}
}

func (l *Listener) startup(nc net.Conn) (*Request, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	done := deadline(ctx, nc, l.cfg.timeout())
	defer done()
	if l.cfg.TLS != nil {
		tc := tls.Server(nc, l.cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		nc = tc
	}
	if l.cfg.Trace != nil {
		nc = tracedConn{nc, l.cfg.Trace}
	}
	req, err := ReadFrame(nc)
	if err != nil {
		return nil, err
	}
	if req.Reply {
		return nil, invalidFrame("an MPA Reply Frame where a Request was due: both ends started as Responder")
	}
	r := &Request{l: l, nc: nc, req: req, Revision: int(req.Rev)}
	e, ulp, ok := req.Enhancement()
	r.PrivateData = append([]byte(nil), ulp...)
	if ok {
		r.Enhanced = &e
	}
	return r, nil
}

// Accept returns the next connection whose MPA Request is valid, for the
// ULP to accept or reject.
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	select {
	case r := <-l.pending:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Request is a received MPA Request Frame waiting for the ULP.
type Request struct {
	l   *Listener
	nc  net.Conn
	req Frame

	Revision    int
	PrivateData []byte        // the initiator's Private Data (after any enhanced data)
	Enhanced    *EnhancedData // the initiator's IRD/ORD and RTR flags (RFC 6581)

	once sync.Once
}

// RemoteAddr returns the initiator's address.
func (r *Request) RemoteAddr() net.Addr { return r.nc.RemoteAddr() }

var errDecided = errors.New("mpa: the request was already accepted or rejected")

// Accept sends the MPA Reply Frame with the listener's settings and
// privateData and starts ep on the connection. IRD and ORD are negotiated
// as RFC 6581 §9.1 says.
func (r *Request) Accept(ep ddp.Endpoint, privateData []byte) (*Conn, error) {
	err := errDecided
	var c *Conn
	r.once.Do(func() {
		c, err = r.accept(ep, privateData)
		if err != nil {
			r.nc.Close()
		}
	})
	return c, err
}

func (r *Request) accept(ep ddp.Endpoint, privateData []byte) (*Conn, error) {
	cfg := &r.l.cfg
	rep := Frame{Reply: true, Markers: cfg.Markers, CRC: !cfg.NoCRC, Rev: r.req.Rev, PrivateData: privateData}
	var neg Negotiated
	var mine EnhancedData
	if e := r.Enhanced; e != nil {
		// "If the responder receives an enhanced MPA message, it MUST
		// respond with an enhanced MPA message." (RFC 6581 §10)
		mine = enhancedFor(ep)
		_, ord := ep.ReadLimits()
		if e.ORD == IRDORDAuto {
			mine.IRD = IRDORDAuto
		}
		if e.IRD == IRDORDAuto {
			mine.ORD = IRDORDAuto
		} else if int(e.IRD) < ord {
			// "The responder MUST set its ORD at most to the initiator IRD."
			if err := ep.SetORD(int(e.IRD)); err != nil {
				return nil, err
			}
			mine.ORD = e.IRD
		}
		if e.PeerToPeer {
			// This responder takes a zero-length RDMA Write or Read as the
			// RTR indication; both are ordinary RDMAP messages to it.
			mine.PeerToPeer, mine.WriteRTR, mine.ReadRTR = true, true, true
			neg.PeerToPeer = true
		}
		rep.Enhanced = true
		rep.PrivateData = append(mine.Append(nil), privateData...)
		neg.PeerIRDORD, neg.LocalIRDORD = e, &mine
	}
	if err := rep.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout())
	defer cancel()
	done := deadline(ctx, r.nc, cfg.timeout())
	_, err := r.nc.Write(rep.Append(nil))
	done()
	if err != nil {
		return nil, err
	}
	fromInit, fromResp := Negotiate(&r.req, &rep)
	neg.Revision, neg.CRC = int(rep.Rev), fromInit.CRC
	neg.MarkersTx, neg.MarkersRx = fromResp.Markers, fromInit.Markers
	neg.PeerData = r.PrivateData
	fromResp.MaxULPDU = maxSend(r.nc, fromResp.Markers)
	c := newConn(r.nc, ep, neg, fromResp, fromInit, true)
	if err := c.run(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reject sends an MPA Reply Frame with the Rejected Connection bit and
// privateData, then closes the connection (RFC 5044 §7.1.2 rule 2). For an
// enhanced Request the Reply carries this end's IRD and ORD.
func (r *Request) Reject(privateData []byte, ird, ord int) error {
	err := errDecided
	r.once.Do(func() {
		defer r.nc.Close()
		cfg := &r.l.cfg
		rep := Frame{Reply: true, Reject: true, Markers: cfg.Markers, CRC: !cfg.NoCRC, Rev: r.req.Rev, PrivateData: privateData}
		if r.Enhanced != nil {
			e := EnhancedData{IRD: clamp14(ird), ORD: clamp14(ord), PeerToPeer: r.Enhanced.PeerToPeer}
			rep.Enhanced = true
			rep.PrivateData = append(e.Append(nil), privateData...)
		}
		if err = rep.Validate(); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout())
		defer cancel()
		done := deadline(ctx, r.nc, cfg.timeout())
		defer done()
		_, err = r.nc.Write(rep.Append(nil))
	})
	return err
}
