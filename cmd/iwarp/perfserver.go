package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"sync"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// perfServe is "iwarp perf --listen": it answers perf clients until ctx
// is done, with a plain TCP or SCTP listener beside for --compare-raw.
func perfServe(ctx context.Context, ep endpoint.URL, o *perfOptions, stdout, stderr io.Writer) error {
	// Clients' goroutines, the raw listener's and the transport's
	// listener (its refusals) all write lines here.
	stderr = &lockedWriter{w: stderr}
	refused := newRefusals(func(peer, why string) {
		fmt.Fprintf(stderr, "iwarp perf: refused %s: %s\n", peer, why)
	}, func(n int) {
		fmt.Fprintf(stderr, "iwarp perf: %d more refused connections not reported\n", n)
	})
	defer refused.close()
	o.link.Refused = func(remote net.Addr, why error) { refused.report(remote.String(), why.Error()) }
	l, rec, err := endpoint.ListenRecorded(ctx, ep, &o.link, stderr)
	if err != nil {
		return err
	}
	srv := perf.NewServer(o.limits)
	rctx, stopRaw := context.WithCancel(ctx)
	var wg sync.WaitGroup
	port, err := startRawServer(rctx, ep, l, srv, &wg, stderr)
	if err != nil {
		stopRaw()
		l.Close()
		rec.Close()
		return fmt.Errorf("raw listener for --compare-raw: %v", err)
	}
	srv.SetRawPort(port)
	fmt.Fprintf(stdout, "listening on %s://%s\n", ep.Scheme, l.Addr())
	if l.Fingerprint != "" {
		fmt.Fprintf(stdout, "fingerprint sha-256 %s\n", l.Fingerprint)
	}
	for {
		p, err := l.Accept(ctx)
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *endpoint.Conn
			err := srv.Handle(ctx, p.Peer, func(qp *rdmap.QueuePair) (func(context.Context), error) {
				var err error
				if c, err = p.Accept(ctx, qp); err != nil {
					return nil, err
				}
				return c.Close, nil
			}, p.Reject)
			if c != nil {
				if at, perr, ok := c.PeerDead(); ok {
					err = fmt.Errorf("peer dead at %s: %v", at.Format(endpoint.PeerDeadTime), perr)
				} else {
					err = c.Explain(err)
				}
			}
			var refusal *perf.RefusedError
			switch {
			case errors.As(err, &refusal):
				refused.report(p.Peer, err.Error())
			case err != nil && ctx.Err() == nil:
				fmt.Fprintf(stderr, "iwarp perf: client %s: %v\n", p.Peer, err)
			}
		}()
	}
	l.Close()
	stopRaw()
	wg.Wait()
	return rec.Close()
}

// startRawServer listens for --compare-raw on a free port of the perf
// listener's host: plain TCP for tcp://, a DTLS/SCTP listener with the
// perf listener's configuration for sctp://, under the perf server's
// connection limits. It serves until ctx ends; should the raw listener
// stop before, stderr hears why (--compare-raw fails from then on).
func startRawServer(ctx context.Context, ep endpoint.URL, l *endpoint.Listener, srv *perf.Server, wg *sync.WaitGroup, stderr io.Writer) (uint16, error) {
	host, _, _ := net.SplitHostPort(l.Addr().String())
	addr := net.JoinHostPort(host, "0")
	if ep.Scheme == "tcp" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.ServeRawTCP(ctx, ln); err != nil {
				fmt.Fprintf(stderr, "iwarp perf: raw listener: %v\n", err)
			}
		}()
		return uint16(ln.Addr().(*net.TCPAddr).Port), nil
	}
	sl, err := sctpddp.Listen(ctx, "udp", addr, srv.RawSCTPConfig(*l.SCTPConfig))
	if err != nil {
		return 0, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.ServeRawSCTP(ctx, sl); err != nil {
			fmt.Fprintf(stderr, "iwarp perf: raw listener: %v\n", err)
		}
		sl.Close()
	}()
	return uint16(sl.Addr().(*net.UDPAddr).Port), nil
}
