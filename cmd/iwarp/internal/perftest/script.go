package perftest

import (
	"context"
	"fmt"
	"time"
)

// afterConnect runs everything after the data connection: the Dest
// exchanges, the test, and the end, as each test's main() orders them
// (write_bw.c, read_bw.c, send_bw.c, send_lat.c, read_lat.c, write_lat.c)
// for one queue pair. Its names are the ones of perftest's comments.
func (s *session) afterConnect(ctx context.Context) error {
	c := s.cfg
	switch c.Test {
	case WriteBW, ReadBW:
		// for each qp: ctx_hand_shake; for each qp: ctx_hand_shake (side
		// REMOTE); "An additional handshake is required after moving qp
		// to RTR."
		for _, what := range []string{"pingpong_dest", "pingpong_dest (remote)", "pingpong_dest (after RTR)"} {
			if err := s.dest(ctx, what, false); err != nil {
				return err
			}
		}
		if !s.client {
			// "For half duplex tests, server just waits for client to
			// exit": a handshake once the client is done, its report,
			// ctx_close_connection.
			if err := s.waitDone(ctx); err != nil {
				return err
			}
			rep, err := s.reports(ctx, BWReport{Size: uint64(c.Size), Iters: uint64(c.Iters)})
			if err != nil {
				return err
			}
			s.res.BW = &rep
			s.res.PeerReport = &rep
			if err := s.dest(ctx, "pingpong_dest (close)", false); err != nil {
				return err
			}
			return s.settle(ctx)
		}
		rep, err := s.runBW(ctx)
		if err != nil {
			return err
		}
		s.res.BW = &rep
		if err := s.dest(ctx, "pingpong_dest (client done)", false); err != nil {
			return err
		}
		peer, err := s.reports(ctx, rep)
		if err != nil {
			return err
		}
		s.res.PeerReport = &peer
		return s.dest(ctx, "pingpong_dest (close)", false)

	case SendBW, SendLat:
		// send_set_up_connection (and for send_bw over iWARP
		// ctx_alloc_credit); for each qp: ctx_hand_shake; ctx_hand_shake;
		// for each qp: ctx_hand_shake (side REMOTE); the receives posted;
		// a handshake "so the client won't send packets before the server
		// has posted his receive wqes"; the test; ctx_close_connection.
		for _, what := range []string{"pingpong_dest", "pingpong_dest (after connect)", "pingpong_dest (remote)"} {
			if err := s.dest(ctx, what, false); err != nil {
				return err
			}
		}
		if c.Test == SendLat || !s.client {
			if err := s.postRecvs(); err != nil {
				return err
			}
		}
		if err := s.dest(ctx, "pingpong_dest (receives posted)", false); err != nil {
			return err
		}
		var err error
		switch {
		case c.Test == SendLat:
			s.res.Lat, err = s.runSendLat(ctx)
		case s.client:
			var rep BWReport
			rep, err = s.runBW(ctx)
			s.res.BW = &rep
		default:
			var rep BWReport
			rep, err = s.runSendServer(ctx)
			s.res.BW = &rep
		}
		if err != nil {
			return err
		}
		return s.closing(ctx)

	case ReadLat, WriteLat:
		// ctx_hand_shake; for each qp: ctx_hand_shake; for each qp:
		// ctx_hand_shake (side REMOTE); "An additional handshake is
		// required after moving qp to RTR."
		for _, what := range []string{"pingpong_dest", "pingpong_dest (per qp)", "pingpong_dest (remote)", "pingpong_dest (after RTR)"} {
			if err := s.dest(ctx, what, false); err != nil {
				return err
			}
		}
		if c.Test == ReadLat {
			// "Only Client post read request": the server goes straight
			// to ctx_close_connection, which the client reaches after
			// its Reads.
			if s.client {
				lat, err := s.runReadLat(ctx)
				if err != nil {
					return err
				}
				s.res.Lat = lat
			}
			if err := s.closing(ctx); err != nil {
				return err
			}
			if !s.client {
				return s.settle(ctx)
			}
			return nil
		}
		// ib_write_lat ends without a closing handshake.
		lat, err := s.runWriteLat(ctx)
		if err != nil {
			return err
		}
		s.res.Lat = lat
		s.linger(ctx)
		return nil
	}
	return fmt.Errorf("perftest: %v is not implemented", c.Test)
}

// waitDone is the server's handshake that waits for the client's end of
// the test: it may take as long as the test (RunTimeout).
func (s *session) waitDone(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
	defer cancel()
	b, err := s.ctl.exchange(ctx, "pingpong_dest (client done)", s.local.Append(nil), DestLen)
	if err != nil {
		return err
	}
	_, err = ParseDest(b)
	return err
}

// closing is ctx_close_connection's handshake; a server waits for it as
// long as the test may take.
func (s *session) closing(ctx context.Context) error {
	if s.client {
		return s.dest(ctx, "pingpong_dest (close)", false)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
	defer cancel()
	_, err := s.ctl.exchange(ctx, "pingpong_dest (close)", s.local.Append(nil), DestLen)
	return err
}

// reports runs xchg_bw_reports: five 8-octet Sends each way.
func (s *session) reports(ctx context.Context, mine BWReport) (BWReport, error) {
	f := mine.Fields()
	var got [ReportFields][]byte
	for i, what := range []string{"bw report: size", "bw report: iterations", "bw report: peak", "bw report: average", "bw report: message rate"} {
		b, err := s.exchange(ctx, what, f[i], ReportFieldLen)
		if err != nil {
			return BWReport{}, err
		}
		got[i] = b
	}
	return ParseBWReport(got)
}

// settle gives the RDMA Writes and Read Responses of the peer, which
// travel on the data connection, a moment to be seen here after the
// control connection said the test was over (the two connections are not
// ordered with each other), then records them.
func (s *session) settle(ctx context.Context) error {
	c := s.cfg
	want := int64(c.Iters)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got int64
		switch c.Test {
		case WriteBW:
			got = s.w.writes.Load()
		case ReadBW, ReadLat:
			got = s.w.reads.Load()
		default:
			got = want
		}
		if got >= want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.finish()
	if err := s.w.err(); err != nil {
		return err
	}
	switch c.Test {
	case WriteBW:
		if s.res.Moved.WritesPlaced != want || s.res.Moved.BytesPlaced != want*int64(c.Size) {
			return fmt.Errorf("perftest: the client says it is done, but %d RDMA Writes (%d octets) were placed here, not %d of %d octets",
				s.res.Moved.WritesPlaced, s.res.Moved.BytesPlaced, want, c.Size)
		}
	case ReadBW, ReadLat:
		if s.res.Moved.ReadsServed != want || s.res.Moved.BytesServed != want*int64(c.Size) {
			return fmt.Errorf("perftest: the client says it is done, but %d RDMA Reads (%d octets) were answered here, not %d of %d octets",
				s.res.Moved.ReadsServed, s.res.Moved.BytesServed, want, c.Size)
		}
	}
	return nil
}

// linger waits, up to a few seconds, for the peer to close the control
// connection, which perftest does once it has polled its last completion
// and printed its figures. ib_write_lat has no closing handshake: a
// client that closes as soon as its last RDMA Write has completed can
// make perftest's server see its own last Write completed in error (siw
// flushes it when the connection ends first, seen under QEMU: "Completion
// with error ... scnt=20, ccnt=19").
func (s *session) linger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// The control queue pair always has a receive posted: it completes
	// (flushed) when the peer disconnects.
	s.ctl.rcq.Wait(ctx)
}
