package perftest

import (
	"context"
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/mpa"
)

// Serve runs one session as perftest's server does ("ib_write_bw -R"),
// on connections from l: it accepts the control connection, runs the
// exchanges, accepts the data connection from the same host (other
// connections meanwhile are rejected with an MPA Reply that has the R
// bit), runs the test and the end, and returns. The test and its
// parameters are cfg's, as a perftest server takes them from its command
// line: only the cycle buffer and the cache line size come from the
// client, and they are held to cfg.MemoryBudget.
//
// ib_write_lat cannot be served: see ErrWriteLatServer.
func Serve(ctx context.Context, l *mpa.Listener, cfg Config) (*Result, error) {
	if cfg.Test == WriteLat {
		return nil, ErrWriteLatServer
	}
	s, err := newSession(cfg, false)
	if err != nil {
		return nil, err
	}
	req, err := l.Accept(ctx)
	if err != nil {
		s.close()
		return nil, err
	}
	defer s.close()
	err = s.serveSession(ctx, l, req)
	s.finish()
	return s.res, err
}

func (s *session) serveSession(ctx context.Context, l *mpa.Listener, req *mpa.Request) error {
	peer := req.RemoteAddr()
	c, err := req.Accept(s.ctl.qp, nil)
	if err != nil {
		return fmt.Errorf("perftest: accepting the control connection from %v: %w", peer, err)
	}
	s.connected(0, c)
	if err := s.preamble(ctx); err != nil {
		return err
	}
	if err := s.resources(); err != nil {
		return fmt.Errorf("%w (refused: the control connection is closed)", err)
	}
	if err := s.newDataQP(); err != nil {
		return err
	}
	if err := s.dest(ctx, "pingpong_dest (before the data connection)", true); err != nil {
		return err
	}
	actx, cancel := s.step(ctx)
	defer cancel()
	for {
		dreq, err := l.Accept(actx)
		if err != nil {
			return fmt.Errorf("perftest: waiting for the data connection from %v: %w", peer, err)
		}
		if !sameHost(dreq.RemoteAddr(), peer) {
			// Another client while this one's session runs.
			dreq.Reject(nil, 0, 0)
			continue
		}
		dc, err := dreq.Accept(s.qp, nil)
		if err != nil {
			return fmt.Errorf("perftest: accepting the data connection from %v: %w", dreq.RemoteAddr(), err)
		}
		s.connected(1, dc)
		break
	}
	if err := s.dest(ctx, "pingpong_dest (after the data connection)", true); err != nil {
		return err
	}
	return s.afterConnect(ctx)
}

// ErrWriteLatServer is Serve's answer for ib_write_lat. perftest's server
// of ib_write_lat sends the first RDMA Write on the data connection
// (run_iter_lat_write: the client waits for the server's ping before its
// own), on which it is the MPA Responder; RFC 5044 §7.1.2 rule 4 has a
// Responder receive an FPDU before it sends any, package mpa enforces that
// rule, and the client, waiting for the ping, sends nothing: the session
// would hang. (Linux siw's responder does not enforce the rule, which is
// how perftest's own server works.) The Go client of ib_write_lat works
// against perftest's server.
var ErrWriteLatServer = errors.New("perftest: ib_write_lat cannot be served here: its server sends the first RDMA Write on the data connection, " +
	"where it is the MPA Responder, which RFC 5044 §7.1.2 rule 4 forbids (a Responder receives an FPDU before it sends one; package mpa enforces it, Linux siw does not). " +
	"Run the Go side as ib_write_lat's client against perftest's server, or serve ib_send_lat or ib_read_lat")
