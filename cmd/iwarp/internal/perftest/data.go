package perftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// The data paths, after perftest's run_iter_* functions
// (perftest_resources.c). Times are kept relative to the session's start.

func (s *session) now() time.Duration { return time.Since(s.start) }

// signaled is perftest's choice of the operations whose completion is
// asked for (run_iter_bw with post_list 1): every cqMod-th, and the last.
func signaled(k, iters, cqMod int) bool { return (k+1)%cqMod == 0 || k == iters-1 }

// runBW is the client of ib_write_bw, ib_read_bw and ib_send_bw
// (run_iter_bw): up to TxDepth operations outstanding, a completion every
// CQMod, the remote address (Writes, Reads) and the local one stepping
// through the cycle buffer. ib_send_bw over iWARP also keeps fewer than
// RxDepth Sends beyond the last credit the receiver wrote.
func (s *session) runBW(ctx context.Context) (BWReport, error) {
	c := s.cfg
	iters := c.Iters
	posted := make([]time.Duration, iters)
	completed := make([]time.Duration, iters)
	var scnt, ccnt int
	var cps [16]rdmap.Completion // CTX_POLL_BATCH
	post := func(k int) error {
		off := offset(uint64(k), c.Size, s.cycle, s.line)
		sge := rdmap.SGE{MR: s.region, Offset: off, Length: uint32(c.Size)}
		uns := !signaled(k, iters, c.CQMod)
		switch c.Test {
		case WriteBW:
			return s.qp.PostWrite(rdmap.WriteWR{ID: uint64(k), SGL: []rdmap.SGE{sge}, RemoteSTag: s.peer.RKey, RemoteTO: s.peer.VAddr + off, Unsignaled: uns})
		case ReadBW:
			return s.qp.PostRead(rdmap.ReadWR{ID: uint64(k), Local: sge, RemoteSTag: s.peer.RKey, RemoteTO: s.peer.VAddr + off, Unsignaled: uns})
		}
		return s.qp.PostSend(rdmap.SendWR{ID: uint64(k), SGL: []rdmap.SGE{sge}, Unsignaled: uns})
	}
	credited := func() bool {
		return c.Test != SendBW || uint32(scnt+1)-s.w.credits.Load() < uint32(c.RxDepth)
	}
	for scnt < iters || ccnt < iters {
		if scnt < iters && scnt-ccnt+1 <= c.TxDepth && credited() {
			err := s.qp.PostBatch(func() error {
				for scnt < iters && scnt-ccnt+1 <= c.TxDepth && credited() {
					posted[scnt] = s.now()
					if err := post(scnt); err != nil {
						return err
					}
					scnt++
				}
				return nil
			})
			if err != nil {
				return BWReport{}, s.dataErr(fmt.Sprintf("posting operation %d", scnt), err)
			}
		}
		if ccnt >= iters {
			continue
		}
		n := s.scq.Poll(cps[:])
		if n == 0 {
			if scnt < iters && scnt-ccnt+1 <= c.TxDepth {
				// Only a credit holds the next Send: it may have come
				// since the posting stopped.
				if !credited() {
					if err := s.waitCredit(ctx); err != nil {
						return BWReport{}, err
					}
				}
				continue
			}
			cp, err := s.scq.Wait(ctx)
			if err != nil {
				return BWReport{}, s.dataErr(fmt.Sprintf("waiting for completion %d of %d", ccnt/c.CQMod+1, (iters+c.CQMod-1)/c.CQMod), err)
			}
			cps[0], n = cp, 1
		}
		t := s.now()
		for _, cp := range cps[:n] {
			if err := s.completion(cp, fmt.Sprintf("operation %d", cp.WRID)); err != nil {
				return BWReport{}, err
			}
			ccnt += c.CQMod
			completed[min(ccnt, iters)-1] = t
		}
	}
	if c.Pattern && c.Test == ReadBW {
		if err := s.checkReadSink(); err != nil {
			return BWReport{}, err
		}
	}
	return bwReport(c.Size, iters, c.CQMod, posted, completed, false), nil
}

// waitCredit waits for ib_send_bw's receiver to write a new credit.
func (s *session) waitCredit(ctx context.Context) error {
	t := time.NewTimer(s.cfg.StepTimeout)
	defer t.Stop()
	select {
	case <-s.w.creditc:
		return nil
	case <-ctx.Done():
		return s.dataErr("waiting for a credit", ctx.Err())
	case <-t.C:
		if err := s.qp.Err(); err != nil {
			return s.dataErr("waiting for a credit", err)
		}
		return fmt.Errorf("perftest: no credit from the receiver for %v (last credit %d): do both ends have the same rx depth (%d here)?",
			s.cfg.StepTimeout, s.w.credits.Load(), s.cfg.RxDepth)
	}
}

// checkReadSink checks, after the last RDMA Read has completed, that every
// offset the Reads wrote holds the pattern the (Go) server filled in.
func (s *session) checkReadSink() error {
	c := s.cfg
	seen := map[uint64]bool{}
	for k := 0; k < c.Iters; k++ {
		off := offset(uint64(k), c.Size, s.cycle, s.line)
		if seen[off] {
			break
		}
		seen[off] = true
		b := s.region.Bytes()[off : off+uint64(c.Size)]
		if i := checkPattern(b, int(off)); i >= 0 {
			return fmt.Errorf("perftest: octet %d read is %#02x, the server's pattern says %#02x", int(off)+i, b[i], byte((int(off)+i)%251))
		}
		s.checked += int64(len(b))
	}
	return nil
}

// postRecvs posts the Send tests' receives, one buffer each
// (ctx_set_recv_wqes posts rx_depth of them before the last handshake).
func (s *session) postRecvs() error {
	c := s.cfg
	for i := 0; i < c.RxDepth; i++ {
		mr, err := s.pd.RegisterMemory(make([]byte, c.Size), 0, rdmap.LocalWrite)
		if err != nil {
			return err
		}
		s.recvs = append(s.recvs, mr)
		if err := s.repost(i); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) repost(i int) error {
	return s.qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: s.recvs[i], Length: uint32(s.cfg.Size)}}})
}

// received checks a receive completion: the Send's length and, with the
// pattern, its octets (the k-th Send came from the sender's offset off).
func (s *session) received(cp rdmap.Completion, k int, off uint64) error {
	if err := s.completion(cp, fmt.Sprintf("receive %d", k+1)); err != nil {
		return err
	}
	if int(cp.ByteLen) != s.cfg.Size {
		return fmt.Errorf("perftest: Send %d has %d octets, %d were due: do both ends have the same message size?", k+1, cp.ByteLen, s.cfg.Size)
	}
	s.res.Moved.SendsReceived++
	s.res.Moved.BytesReceived += int64(cp.ByteLen)
	if s.cfg.Pattern {
		b := s.recvs[cp.WRID].Bytes()[:cp.ByteLen]
		if i := checkPattern(b, int(off)); i >= 0 {
			return fmt.Errorf("perftest: octet %d of Send %d is %#02x, the pattern says %#02x", i, k+1, b[i], byte((int(off)+i)%251))
		}
		s.checked += int64(len(b))
	}
	return nil
}

// runSendServer is the receiver of ib_send_bw (run_iter_bw_server): it
// counts Iters Sends, reposting a buffer while fewer than Iters are
// posted, and over iWARP RDMA Writes the count received into the sender's
// credit buffer every RxDepth/3 receives. Its figures have no peak: the
// time runs from the first receive to the last.
func (s *session) runSendServer(ctx context.Context) (BWReport, error) {
	c := s.cfg
	posted := c.RxDepth
	creditEvery := c.RxDepth / 3
	var first, last time.Duration
	var cbuf [CreditLen]byte
	creditMR, err := s.pd.RegisterMemory(cbuf[:], 0, 0)
	if err != nil {
		return BWReport{}, err
	}
	for rcnt := 0; rcnt < c.Iters; {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
		cp, err := s.rcq.Wait(wctx)
		cancel()
		if err != nil {
			return BWReport{}, s.dataErr(fmt.Sprintf("waiting for Send %d of %d", rcnt+1, c.Iters), err)
		}
		if rcnt == 0 {
			first = s.now()
		}
		if err := s.received(cp, rcnt, offset(uint64(rcnt), c.Size, s.cycle, s.line)); err != nil {
			return BWReport{}, err
		}
		rcnt++
		if posted+1 <= c.Iters {
			if err := s.repost(int(cp.WRID)); err != nil {
				return BWReport{}, s.dataErr("reposting a receive", err)
			}
			posted++
		}
		if (rcnt%c.RxDepth)%creditEvery == 0 {
			// The credit is written inline: its octets are copied at
			// once, so the buffer can change for the next one.
			AppendCredit(creditMR.Bytes()[:0], uint32(rcnt))
			err := s.qp.PostWrite(rdmap.WriteWR{ID: 1 << 32, SGL: []rdmap.SGE{{MR: creditMR, Length: CreditLen}},
				RemoteSTag: s.peer.RKey, RemoteTO: s.peer.VAddr, Inline: true, Unsignaled: true})
			if err != nil {
				return BWReport{}, s.dataErr("writing a credit", err)
			}
		}
		last = s.now()
	}
	return bwReport(c.Size, c.Iters, 1, []time.Duration{first}, []time.Duration{last}, true), nil
}

// runSendLat is both ends of ib_send_lat (run_iter_lat_send): the client
// sends first; each end sends once it has received, reposting while
// enough receives are due, and asks for a completion every CQMod Sends.
func (s *session) runSendLat(ctx context.Context) (*LatStats, error) {
	c := s.cfg
	posted := make([]time.Duration, c.Iters)
	var scnt, rcnt int
	for scnt < c.Iters || rcnt < c.Iters {
		if rcnt < c.Iters && !(scnt < 1 && s.client) {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
			cp, err := s.rcq.Wait(wctx)
			cancel()
			if err != nil {
				return nil, s.dataErr(fmt.Sprintf("waiting for Send %d of %d", rcnt+1, c.Iters), err)
			}
			if err := s.received(cp, rcnt, 0); err != nil {
				return nil, err
			}
			rcnt++
			if rcnt+c.RxDepth <= c.Iters {
				if err := s.repost(int(cp.WRID)); err != nil {
					return nil, s.dataErr("reposting a receive", err)
				}
			}
		}
		if scnt < c.Iters {
			posted[scnt] = s.now()
			scnt++
			sig := scnt%c.CQMod == 0 || scnt == c.Iters
			err := s.qp.PostSend(rdmap.SendWR{ID: uint64(scnt), SGL: []rdmap.SGE{{MR: s.region, Length: uint32(c.Size)}}, Unsignaled: !sig})
			if err != nil {
				return nil, s.dataErr(fmt.Sprintf("posting Send %d", scnt), err)
			}
			if sig {
				cp, err := s.scq.Wait(ctx)
				if err != nil {
					return nil, s.dataErr(fmt.Sprintf("waiting for Send %d's completion", scnt), err)
				}
				if err := s.completion(cp, fmt.Sprintf("Send %d", scnt)); err != nil {
					return nil, err
				}
			}
		}
	}
	return latStats(posted, true), nil
}

// runReadLat is the client of ib_read_lat (run_iter_lat): one RDMA Read
// at a time, each waited for.
func (s *session) runReadLat(ctx context.Context) (*LatStats, error) {
	c := s.cfg
	posted := make([]time.Duration, c.Iters)
	for k := 0; k < c.Iters; k++ {
		posted[k] = s.now()
		err := s.qp.PostRead(rdmap.ReadWR{ID: uint64(k), Local: rdmap.SGE{MR: s.region, Length: uint32(c.Size)}, RemoteSTag: s.peer.RKey, RemoteTO: s.peer.VAddr})
		if err != nil {
			return nil, s.dataErr(fmt.Sprintf("posting RDMA Read %d", k+1), err)
		}
		cp, err := s.scq.Wait(ctx)
		if err != nil {
			return nil, s.dataErr(fmt.Sprintf("waiting for RDMA Read %d", k+1), err)
		}
		if err := s.completion(cp, fmt.Sprintf("RDMA Read %d", k+1)); err != nil {
			return nil, err
		}
	}
	if c.Pattern {
		if err := s.checkReadSink(); err != nil {
			return nil, err
		}
	}
	return latStats(posted, false), nil
}

// runWriteLat is both ends of ib_write_lat (run_iter_lat_write). perftest
// spins on the last octet of its buffer until the peer's RDMA Write has
// set it to the count of pings so far; here the watcher, which sees each
// segment placed on the goroutine that placed it, hands that octet over.
// The server writes first (perftest: the server does not wait before its
// first Write; the client does).
func (s *session) runWriteLat(ctx context.Context) (*LatStats, error) {
	c := s.cfg
	posted := make([]time.Duration, c.Iters)
	var scnt, ccnt, rcnt int
	last := s.src.Bytes()[c.Size-1:]
	for scnt < c.Iters || ccnt < c.Iters || rcnt < c.Iters {
		if rcnt < c.Iters && !(scnt < 1 && !s.client) {
			rcnt++
			if err := s.waitPing(ctx, byte(rcnt)); err != nil {
				return nil, err
			}
		}
		if scnt < c.Iters {
			posted[scnt] = s.now()
			scnt++
			// The previous Write has completed (below): the source can
			// change.
			last[0] = byte(scnt)
			err := s.qp.PostWrite(rdmap.WriteWR{ID: uint64(scnt), SGL: []rdmap.SGE{{MR: s.src, Length: uint32(c.Size)}},
				RemoteSTag: s.peer.RKey, RemoteTO: s.peer.VAddr})
			if err != nil {
				return nil, s.dataErr(fmt.Sprintf("posting RDMA Write %d", scnt), err)
			}
		}
		if ccnt < c.Iters {
			cp, err := s.scq.Wait(ctx)
			if err != nil {
				return nil, s.dataErr(fmt.Sprintf("waiting for RDMA Write %d", ccnt+1), err)
			}
			if err := s.completion(cp, fmt.Sprintf("RDMA Write %d", ccnt+1)); err != nil {
				return nil, err
			}
			ccnt++
		}
	}
	return latStats(posted, true), nil
}

// waitPing waits until the octet perftest polls holds want.
func (s *session) waitPing(ctx context.Context, want byte) error {
	t := time.NewTimer(s.cfg.RunTimeout)
	defer t.Stop()
	for {
		select {
		case v := <-s.w.pings:
			if v == want {
				return nil
			}
		case <-ctx.Done():
			return s.dataErr(fmt.Sprintf("waiting for ping %d", want), ctx.Err())
		case <-t.C:
			return s.dataErr(fmt.Sprintf("waiting for ping %d", want), errors.New("timed out"))
		case <-s.qp.Terminated():
			return s.dataErr(fmt.Sprintf("waiting for ping %d", want), errors.New("the stream stopped"))
		}
	}
}
