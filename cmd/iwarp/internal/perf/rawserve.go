package perf

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// The raw listener serves only clients with a live perf connection: the
// header names the connection by the token its advert gave, the transfer
// stays within what that connection's hello was granted, and it uses that
// connection's raw buffers (counted against the budgets with the hello);
// one transfer runs at a time per perf connection. Connections to the raw
// port are limited as perf connections are (MaxConns, MaxConnsPerPeer)
// until their header is in, which must come within HelloTimeout; a
// transfer on which nothing moves for IdleTimeout is closed.

// ServeRawTCP serves raw transfers over plain TCP on ln until ctx ends or
// ln is closed; it closes the transfers under way before it returns. An
// error of ln's Accept (too many open files, say) does not stop it: it
// tries again after a pause, 5 ms doubling to 1 s, as net/http's Server
// does.
func (s *Server) ServeRawTCP(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		pause = 0
		peer := nc.RemoteAddr().String()
		if s.rawAdm.Take(peer, 0) != nil {
			nc.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.rawAdm.Release(peer, 0)
			closeOnce := sync.OnceFunc(func() { nc.Close() })
			defer closeOnce()
			end := context.AfterFunc(ctx, closeOnce)
			defer end()
			s.serveRawTCP(nc, closeOnce)
		}()
	}
}

// serveRawTCP runs one raw TCP transfer.
func (s *Server) serveRawTCP(nc net.Conn, closeConn func()) {
	var hb [RawHeaderLen]byte
	nc.SetReadDeadline(time.Now().Add(s.lim.HelloTimeout))
	if _, err := io.ReadFull(nc, hb[:]); err != nil {
		return
	}
	nc.SetReadDeadline(time.Time{})
	h, _, err := ParseRawHeader(hb[:])
	if err != nil {
		return
	}
	c, err := s.rawConn(h, closeConn)
	if err != nil {
		return
	}
	defer c.rawDone()
	var progress atomic.Uint64
	stopIdle := watch(s.lim.IdleTimeout, &progress, closeConn)
	defer stopIdle()
	size, count := int(h.Size), int(h.Count)
	switch h.Mode {
	case RawToServer:
		r := newMsgReader(nc, c.rawBuf, size, h.CRC)
		r.progress = &progress
		if r.read(count) == nil {
			nc.Write([]byte{1})
		}
	case RawToClient:
		w := newMsgWriter(nc, c.rawSrc, c.rawBuf, size, h.CRC)
		w.progress = &progress
		if w.write(count) == nil {
			io.ReadFull(nc, hb[:1])
		}
	case RawRPC:
		half := len(c.rawBuf) / 2
		r := newMsgReader(nc, c.rawBuf[:half], int(h.Req), h.CRC)
		w := newMsgWriter(nc, c.rawSrc, c.rawBuf[half:], size, h.CRC)
		r.progress, w.progress = &progress, &progress
		serveRPC(r, w, count)
	}
}

// serveRPC answers count requests: after each read, the requests it
// completed are answered in one write.
func serveRPC(r *msgReader, w *msgWriter, count int) error {
	for served := 0; served < count; {
		k, err := r.readSome()
		if err != nil {
			return err
		}
		k = min(k, count-served)
		for range k {
			if err := w.queue(); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
		served += k
	}
	return nil
}

// RawSCTPConfig returns the configuration of the raw SCTP listener: the
// perf listener's (the same DTLS, MTU and tuning), with the perf server's
// connection limits on its associations.
func (s *Server) RawSCTPConfig(perf sctpddp.Config) *sctpddp.Config {
	perf.Trace = nil
	perf.MaxAssociations, perf.MaxAssociationsPerPeer = s.lim.MaxConns, s.lim.MaxConnsPerPeer
	return &perf
}

// ServeRawSCTP serves raw transfers over SCTP, one per association, on l
// until ctx ends or l is closed. l's own limits (sctpddp.Config's
// MaxAssociations, MaxAssociationsPerPeer, the handshake's) apply to the
// associations; give it the perf server's.
func (s *Server) ServeRawSCTP(ctx context.Context, l *sctpddp.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		a, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, sctpddp.ErrClosed) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tctx, tcancel := context.WithCancel(ctx)
			defer tcancel()
			// The transfer's reads end when the association closes.
			stop := context.AfterFunc(tctx, func() { a.Close() })
			defer stop()
			s.serveRawSCTP(tctx, a, tcancel)
			// Deliver the last answer before closing.
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			a.Shutdown(sctx)
			scancel()
			a.Close()
		}()
	}
}

// serveRawSCTP runs one raw SCTP transfer.
func (s *Server) serveRawSCTP(ctx context.Context, a *sctpddp.Association, cancel func()) {
	hctx, hcancel := context.WithTimeout(ctx, s.lim.HelloTimeout)
	defer hcancel()
	st, err := a.AcceptStream(hctx)
	if err != nil {
		return
	}
	var hb [wire.SSNLen + RawHeaderLen]byte
	h, err := sctpRecvHeader(hctx, st, hb[:])
	if err != nil {
		return
	}
	c, err := s.rawConn(h, cancel)
	if err != nil {
		return
	}
	defer c.rawDone()
	var progress atomic.Uint64
	stopIdle := watch(s.lim.IdleTimeout, &progress, cancel)
	defer stopIdle()
	buf := c.rawBuf[:sctpBufLen]
	size, count := int(h.Size), int(h.Count)
	// Progress is counted per message in sctpRecv's callers: here, per
	// request and per stretch of a stream.
	switch h.Mode {
	case RawToServer:
		for left := count; left > 0; {
			k := min(left, 64)
			if sctpRecv(st, k*size, buf) != nil {
				return
			}
			progress.Add(1)
			left -= k
		}
		sctpWrite(ctx, st, []byte{1})
	case RawToClient:
		for left := count; left > 0; {
			k := min(left, 64)
			if sctpSend(ctx, st, c.rawSrc, size, k) != nil {
				return
			}
			progress.Add(1)
			left -= k
		}
		sctpRecv(st, 1, buf)
	case RawRPC:
		for range count {
			if sctpRecv(st, int(h.Req), buf) != nil || sctpSend(ctx, st, c.rawSrc, size, 1) != nil {
				return
			}
			progress.Add(1)
		}
	}
}
