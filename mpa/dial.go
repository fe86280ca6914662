package mpa

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// Dial connects to an MPA responder at addr as the Initiator (RFC 5044
// §7.1.2 rules 1 and 3): it sends the MPA Request Frame, validates the
// Reply, negotiates CRCs, Markers, IRD/ORD and the RTR indication (RFC
// 6581), and starts ep on the connection. ctx bounds the whole startup;
// so does the Config's HandshakeTimeout. A nil cfg means the defaults.
//
// A Reply with the Rejected Connection bit gives a *ddp.RejectedError.
// MPA exits then, leaving the TCP connection open, and "The ULP may close
// TCP or use the connection for other purposes" (RFC 5044 §7.1.2 rule
// 3): Dial, which made the connection, closes it; a ULP that would use it
// makes the connection itself and starts MPA on it with Client.
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

// Client runs the Initiator's startup over nc, a connection the caller
// made (from a chosen local address, through a proxy, ...), and starts ep
// on it, as Dial does after connecting. On an error the caller closes nc.
// After a Reject (a *ddp.RejectedError) nc is open and past the Reply,
// for the caller to close or to use for other purposes (RFC 5044 §7.1.2
// rule 3); over Config.TLS its TLS session is lost with the Reject.
func Client(ctx context.Context, nc net.Conn, ep ddp.Endpoint, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.handshakeTimeout())
	defer cancel()
	return initiate(ctx, nc, ep, cfg)
}

func initiate(ctx context.Context, nc net.Conn, ep ddp.Endpoint, cfg *Config) (_ *Conn, err error) {
	done := deadline(ctx, nc, cfg.handshakeTimeout())
	defer done()
	if cfg.TLS != nil {
		tc, err := startTLS(ctx, nc, cfg.TLS, false)
		if err != nil {
			return nil, fmt.Errorf("mpa: TLS handshake: %w", err)
		}
		nc = tc
	}
	nc = traced(cfg, nc)
	defer func() { endTrace(nc, err) }()
	req := Frame{Markers: cfg.Markers, CRC: !cfg.NoCRC, Rev: uint8(cfg.revision()), PrivateData: cfg.PrivateData}
	ird, ord := ep.ReadLimits()
	offer := ddp.Offer(ird, ord, cfg.rtrs())
	if len(cfg.rtrs()) > 0 && !offer.PeerToPeer {
		return nil, fmt.Errorf("mpa: Config.RTR %v: with ORD 0 this end cannot send a zero-length RDMA Read Request (RFC 5040 §6.1); allow another RTR indication or set ClientServer", cfg.RTR)
	}
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
		if newORD != ord && fail == nil {
			if err := ep.SetORD(newORD); err != nil {
				fail = localError("lowering the ORD to the responder's IRD %d: %v", newORD, err)
			}
		}
		if fail == nil {
			rtr = r
			neg.RTR = r
		}
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
