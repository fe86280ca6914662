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

// Dial connects to an MPA responder at addr as the Initiator (RFC 5044
// §7.1.2 rules 1 and 3): it sends the MPA Request Frame, validates the
// Reply, negotiates CRCs, Markers, IRD/ORD and the RTR indication (RFC
// 6581), and starts ep on the connection. ctx bounds the whole startup;
// so does the Config's HandshakeTimeout. A nil cfg means the defaults.
func Dial(ctx context.Context, network, addr string, ep ddp.Endpoint, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.handshakeTimeout())
	defer cancel()
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
	done := deadline(ctx, nc, cfg.handshakeTimeout())
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
	ird, ord := ep.ReadLimits()
	offer := ddp.Offer(ird, ord, cfg.rtrs())
	if cfg.revision() >= 2 {
		req.Enhanced = true
		req.PrivateData = append(offer.Append(nil), cfg.PrivateData...)
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
		re := &ddp.RejectedError{PrivateData: append([]byte(nil), ulp...)}
		if enhanced {
			re.Enhanced = &theirs
		}
		return nil, re
	}
	fromInit, fromResp := Negotiate(&req, &rep)
	neg := Negotiated{Revision: int(rep.Rev), CRC: fromInit.CRC, MarkersTx: fromInit.Markers, MarkersRx: fromResp.Markers,
		PeerData: append([]byte(nil), ulp...)}
	var fail *term.Error
	rtr := ddp.RTRNone
	if enhanced {
		neg.PeerIRDORD, neg.LocalIRDORD = &theirs, &offer
		neg.PeerToPeer = offer.PeerToPeer
		newORD, r, err := ddp.Settle(offer, theirs, ird, ord, cfg.rtrs())
		if errors.As(err, &fail) {
			// Error codes 6 and 7 of RFC 6581: the connection starts so
			// that the Terminate can say so, and then ends.
		} else if err != nil {
			return nil, invalidFrame("%v", err)
		}
		if newORD != ord {
			if err := ep.SetORD(newORD); err != nil {
				return nil, err
			}
		}
		rtr = r
		neg.RTR = r
	}
	fromInit.MaxULPDU = maxSend(nc, fromInit.Markers)
	c := newConn(nc, ep, cfg, neg, fromInit, fromResp, false)
	if err := c.run(rtr); err != nil {
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
	done := deadline(ctx, nc, l.cfg.handshakeTimeout())
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
	Enhanced    *ddp.EnhancedData // the initiator's IRD/ORD and RTR flags (RFC 6581)

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
	if offer := r.Enhanced; offer != nil {
		// "If the responder receives an enhanced MPA message, it MUST
		// respond with an enhanced MPA message." (RFC 6581 §10)
		ird, ord := ep.ReadLimits()
		mine, newORD := ddp.Answer(*offer, ird, ord, responderRTRs)
		if newORD != ord {
			if err := ep.SetORD(newORD); err != nil {
				return nil, err
			}
		}
		rep.Enhanced = true
		rep.PrivateData = append(mine.Append(nil), privateData...)
		neg.PeerIRDORD, neg.LocalIRDORD = offer, &mine
		neg.PeerToPeer = mine.PeerToPeer
	}
	if err := rep.Validate(); err != nil {
		return nil, err
	}
	done := deadline(context.Background(), r.nc, cfg.handshakeTimeout())
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
	c := newConn(r.nc, ep, cfg, neg, fromResp, fromInit, true)
	if neg.PeerToPeer {
		// The startup ends with the initiator's RTR indication (RFC 6581
		// §9.3): one that does not come in time ends the connection, as a
		// Request that does not come does (rule 10).
		c.awaitFirst(cfg.handshakeTimeout())
	}
	if err := c.run(ddp.RTRNone); err != nil {
		if c.firstTimer != nil {
			c.firstTimer.Stop()
		}
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
			e, _ := ddp.Answer(*r.Enhanced, ird, ord, responderRTRs)
			rep.Enhanced = true
			rep.PrivateData = append(e.Append(nil), privateData...)
		}
		if err = rep.Validate(); err != nil {
			return
		}
		done := deadline(context.Background(), r.nc, cfg.handshakeTimeout())
		defer done()
		_, err = r.nc.Write(rep.Append(nil))
	})
	return err
}
