package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/admission"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/responder"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/trace"
)

func init() {
	register("serve", command{
		summary: "a responder for labs and tests: registers memory, advertises it, reports what arrives",
		run:     runServe,
	})
}

type serveOptions struct {
	listen    string
	mrSize    int
	recvDepth int
	recvSize  int
	json      bool
	advSend   bool
	observe   string
	link      endpoint.Flags
	demo      *demo.Link // set when --observe joined a demo

	maxConns        int
	maxConnsPerPeer int
	memBudget       int64
	idleTimeout     time.Duration
}

// responderConfig is the responder's configuration of each connection.
func (o *serveOptions) responderConfig() *responder.Config {
	c := &responder.Config{MRSize: o.mrSize, RecvDepth: o.recvDepth, RecvSize: o.recvSize, IdleTimeout: o.idleTimeout, AdvertiseSend: o.advSend}
	if o.demo != nil {
		c.Show = func(name string, mr *rdmap.MemoryRegion) (trace.Observer, func()) {
			o.demo.Add(name, mr)
			return o.demo.Observer(mr), func() { o.demo.Gone(mr) }
		}
	}
	return c
}

// connBytes is what one connection of serve holds in regions and buffers.
func (o *serveOptions) connBytes() int64 { return o.responderConfig().ConnBytes() }

// servedRequest is a pending connection as the responder takes it.
type servedRequest struct{ p *endpoint.Pending }

func (r servedRequest) Reject() { r.p.Reject() }

func (r servedRequest) Accept(ctx context.Context, qp *rdmap.QueuePair, privateData []byte) (responder.Conn, error) {
	c, err := r.p.AcceptWith(ctx, qp, privateData)
	if err != nil {
		return nil, err
	}
	return servedConn{c}, nil
}

// servedConn is an accepted connection as the responder holds it.
type servedConn struct{ c *endpoint.Conn }

func (c servedConn) Info() fmt.Stringer                 { return c.c.Info }
func (c servedConn) PeerDead() (time.Time, error, bool) { return c.c.PeerDead() }
func (c servedConn) Close(ctx context.Context)          { c.c.Close(ctx) }

func runServe(args []string, stdout, stderr io.Writer) error {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "", "the `URL` to listen on: tcp://host:port or sctp://host:port")
	fs.IntVar(&o.mrSize, "mr-size", 1<<20, "bytes of the memory region registered for each connection")
	fs.IntVar(&o.recvDepth, "recv-depth", 16, "receive buffers posted for each connection")
	fs.IntVar(&o.recvSize, "recv-size", 65536, "bytes of each receive buffer")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per event on stdout")
	fs.BoolVar(&o.advSend, "advertise-send", false, "also Send the region's 16-octet descriptor as the stream's first message")
	fs.StringVar(&o.observe, "observe", "", "stream every connection's placements to the `ADDR`ess of a running 'iwarp demo', where a page can watch them")
	fs.IntVar(&o.maxConns, "max-conns", 256, "connections served at once, in all")
	fs.IntVar(&o.maxConnsPerPeer, "max-conns-per-peer", 16, "connections served at once from one peer (an IPv4 address or an IPv6 /64)")
	fs.Int64Var(&o.memBudget, "mem-budget", 1<<30, "octets of regions and receive buffers, in all connections")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 5*time.Minute, "close a connection on which nothing arrives or leaves for this long (0: never)")
	o.link.Register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if o.listen == "" {
		return usagef("--listen URL is required")
	}
	ep, err := endpoint.Parse(o.listen)
	if err != nil {
		return err
	}
	if err := o.link.Check(ep, true); err != nil {
		return err
	}
	if o.mrSize <= 0 || o.mrSize > 1<<30 {
		return usagef("--mr-size must be between 1 and 1 GiB")
	}
	if o.recvDepth <= 0 || o.recvDepth > 4096 {
		return usagef("--recv-depth must be between 1 and 4096")
	}
	if o.maxConns <= 0 || o.maxConnsPerPeer <= 0 {
		return usagef("--max-conns and --max-conns-per-peer must be at least 1")
	}
	if o.memBudget < o.connBytes() {
		return usagef("--mem-budget of %d octets does not hold one connection's %d", o.memBudget, o.connBytes())
	}
	if o.recvSize <= 0 || o.recvSize > 16<<20 {
		return usagef("--recv-size must be between 1 and 16 MiB")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, ep, &o, stdout, stderr)
}

func serve(ctx context.Context, ep endpoint.URL, o *serveOptions, stdout, stderr io.Writer) error {
	log := responder.NewLog(stdout, o.json)
	refused := newRefusals(func(peer, why string) {
		log.Emit(map[string]any{"event": "refused", "peer": peer, "reason": why}, fmt.Sprintf("refused %s: %s", peer, why))
	}, func(n int) {
		log.Emit(map[string]any{"event": "unreported", "refused": n}, fmt.Sprintf("%d more refused connections not reported", n))
	})
	defer refused.close()
	o.link.Refused = func(remote net.Addr, why error) { refused.report(remote.String(), why.Error()) }
	l, rec, err := endpoint.ListenRecorded(ctx, ep, &o.link, stderr)
	if err != nil {
		return err
	}
	url := ep.Scheme + "://" + l.Addr().String()
	ev := map[string]any{"event": "listening", "url": url}
	text := "listening on " + url
	if l.Fingerprint != "" {
		ev["fingerprint"] = l.Fingerprint
		text += "\nfingerprint sha-256 " + l.Fingerprint
	}
	log.Emit(ev, text)
	if l.Fingerprint != "" && o.json {
		fmt.Fprintln(stderr, "iwarp: fingerprint sha-256", l.Fingerprint)
	}

	if o.observe != "" {
		link, err := demo.DialLink(ctx, o.observe, "iwarp serve")
		if err != nil {
			l.Close()
			rec.Close()
			return err
		}
		defer link.Close()
		tab, err := link.Tab(ctx)
		if err != nil {
			l.Close()
			rec.Close()
			return err
		}
		o.demo = link
		log.Emit(map[string]any{"event": "observed", "demo": o.observe, "tab": tab},
			fmt.Sprintf("the demo at %s can watch this serve: type the code %d under \"Code from another tab\" and press \"Observe tab\"", o.observe, tab))
	}

	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	rcfg := o.responderConfig()
	adm := admission.New(admission.Limits{MaxConns: o.maxConns, MaxConnsPerPeer: o.maxConnsPerPeer, MemBudget: o.memBudget})
	var wg sync.WaitGroup
	n := 0
	for {
		p, err := l.Accept(ctx)
		if err != nil {
			break
		}
		if err := adm.Take(p.Peer, o.connBytes()); err != nil {
			p.Reject()
			refused.report(p.Peer, serveRefusal(err))
			continue
		}
		n++
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			defer adm.Release(p.Peer, o.connBytes())
			if err := responder.Serve(ctx, dev, servedRequest{p}, id, rcfg, log); err != nil {
				fmt.Fprintf(stderr, "iwarp serve: connection %d from %s: %v\n", id, p.Peer, err)
			}
		}(n)
	}
	l.Close()
	wg.Wait()
	return rec.Close()
}

// serveRefusal says which of serve's flags an admission refusal met.
func serveRefusal(err error) string {
	flag := map[admission.Limit]string{admission.Conns: "--max-conns", admission.PeerConns: "--max-conns-per-peer", admission.Memory: "--mem-budget"}
	var r *admission.Refusal
	if errors.As(err, &r) {
		return fmt.Sprintf("%v (%s)", r, flag[r.Limit])
	}
	return err.Error()
}
