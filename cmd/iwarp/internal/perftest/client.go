package perftest

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

// Dial runs one session as perftest's client does ("ib_write_bw -R
// server"): the control connection to addr, the version and parameter
// exchanges, then the data connection to the same address (retried as
// perftest retries it: the server listens again only after the first
// exchanges), the test, and the end. Both connections are MPA
// connections, client-server, each with the IRD and ORD that perftest's
// rdma_cm parameters ask for: 0 and 0, but OutReads on the data
// connection of the read tests.
func Dial(ctx context.Context, addr string, cfg Config) (*Result, error) {
	s, err := newSession(cfg, true)
	if err != nil {
		return nil, err
	}
	defer s.close()
	err = s.dialSession(ctx, addr)
	s.finish()
	return s.res, err
}

func (s *session) dialSession(ctx context.Context, addr string) error {
	c, err := s.dial(ctx, addr, 0, s.ctl.qp)
	if err != nil {
		return fmt.Errorf("perftest: the control connection to %s: %w", addr, err)
	}
	s.connected(0, c)
	if err := s.preamble(ctx); err != nil {
		return err
	}
	if err := s.resources(); err != nil {
		return err
	}
	// create_rdma_cm_connection: a handshake, the data connection, a
	// handshake.
	if err := s.dest(ctx, "pingpong_dest (before the data connection)", true); err != nil {
		return err
	}
	if err := s.dialData(ctx, addr); err != nil {
		return err
	}
	if err := s.dest(ctx, "pingpong_dest (after the data connection)", true); err != nil {
		return err
	}
	return s.afterConnect(ctx)
}

// mpaConfig returns connection conn's MPA configuration.
func (s *session) mpaConfig(conn int) *mpa.Config {
	var m mpa.Config
	if s.cfg.MPA != nil {
		m = *s.cfg.MPA
	}
	m.ClientServer = true
	if m.FirstFPDUDelay == 0 && s.cfg.FirstFPDUDelay > 0 && conn == 0 {
		// The data connection waits in dialData instead: mpa would
		// sleep at its first FPDU, inside the measured test.
		m.FirstFPDUDelay = s.cfg.FirstFPDUDelay
	}
	return &m
}

func (s *session) dial(ctx context.Context, addr string, conn int, qp *rdmap.QueuePair) (*mpa.Conn, error) {
	ctx, cancel := s.step(ctx)
	defer cancel()
	return mpa.Dial(ctx, "tcp", addr, qp, s.mpaConfig(conn))
}

// dialData makes the data connection, trying up to DataRetries times 100
// ms apart as rdma_cm_client_connection does; each try has a queue pair
// of its own.
func (s *session) dialData(ctx context.Context, addr string) error {
	var last error
	for try := 0; try < s.cfg.DataRetries; try++ {
		if try > 0 {
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := s.newDataQP(); err != nil {
			return err
		}
		s.res.DataTries = try + 1
		c, err := s.dial(ctx, addr, 1, s.qp)
		if err == nil {
			s.connected(1, c)
			// Linux siw's accept race (Config.FirstFPDUDelay): nothing
			// goes on this connection before the pause is over.
			if d := s.firstDelay(); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		last = err
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.qp.Close(cctx)
		cancel()
		s.qp = nil
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("perftest: the data connection to %s, %d tries: %w", addr, s.cfg.DataRetries, last)
}

// sameHost reports whether two addresses have the same IP.
func sameHost(a, b net.Addr) bool {
	ta, ok1 := a.(*net.TCPAddr)
	tb, ok2 := b.(*net.TCPAddr)
	return ok1 && ok2 && ta.IP.Equal(tb.IP)
}

// firstDelay is the pause after a data connection's MPA Reply.
func (s *session) firstDelay() time.Duration {
	if s.cfg.MPA != nil && s.cfg.MPA.FirstFPDUDelay != 0 {
		return s.cfg.MPA.FirstFPDUDelay
	}
	return max(s.cfg.FirstFPDUDelay, 0)
}
