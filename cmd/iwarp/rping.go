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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/rping"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
)

func init() {
	register("rping", command{
		summary: "rdma-core's rping, client or server, over tcp:// (with Linux) or sctp://",
		run:     runRping,
	})
}

// rpingFirstFPDUDelay is the client's default pause between the MPA Reply
// and its first FPDU. Linux siw's responder sends its Reply before it
// hooks the socket to the queue pair, and an FPDU that arrives in between
// is not read until more data comes; rping's server then waits for ever.
// Once per connection, 20 ms is nothing to rping and clears the race with
// room to spare (docs/transports.md gives the measurements).
const rpingFirstFPDUDelay = 20 * time.Millisecond

type rpingOptions struct {
	server, client bool
	addr           string
	port           int
	count, size    int
	verbose        bool
	validate       bool
	debug          bool
	persistent     bool

	rev         int
	p2p         bool
	rtr         string
	privateData string
	ird, ord    int
	firstDelay  time.Duration
	link        endpoint.Flags

	rtrs []ddp.RTR
}

// rpingBoolFlags and rpingValueFlags are rping's one-letter flags, for
// splitting "-vV" and "-C10" as getopt does.
const (
	rpingBoolFlags  = "scvVdP"
	rpingValueFlags = "apCS"
)

// expandShortFlags rewrites getopt-style clusters ("-vVd", "-C10") into
// separate flags, leaving every argument that names a flag of fs as it is.
func expandShortFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' || strings.Contains(a, "=") || fs.Lookup(a[1:]) != nil {
			out = append(out, a)
			continue
		}
		body := a[1:]
		if strings.ContainsRune(rpingValueFlags, rune(body[0])) {
			out = append(out, "-"+body[:1], body[1:])
			continue
		}
		ok := true
		for _, r := range body {
			ok = ok && strings.ContainsRune(rpingBoolFlags, r)
		}
		if !ok {
			out = append(out, a)
			continue
		}
		for _, r := range body {
			out = append(out, "-"+string(r))
		}
	}
	return out
}

// rpingFlags defines the flags of iwarp rping in a new FlagSet.
func rpingFlags(o *rpingOptions, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, rpingUsage)
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.server, "s", false, "server side")
	fs.BoolVar(&o.client, "c", false, "client side")
	fs.StringVar(&o.addr, "a", "", "`addr`ess: the server's to listen on, the client's to connect to")
	fs.IntVar(&o.port, "p", rping.DefaultPort, "`port`")
	fs.IntVar(&o.count, "C", 0, "ping `count` (client); 0 pings until interrupted")
	fs.IntVar(&o.size, "S", rping.DefaultSize, fmt.Sprintf("ping data `size` (%d to %d)", rping.MinSize, rping.MaxSize))
	fs.BoolVar(&o.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&o.validate, "V", false, "validate ping data")
	fs.BoolVar(&o.debug, "d", false, "debug printfs")
	fs.BoolVar(&o.persistent, "P", false, "persistent server mode allowing multiple connections")
	fs.IntVar(&o.rev, "rev", 2, "tcp:// client: the MPA `revision` to request, 1 or 2")
	fs.BoolVar(&o.p2p, "p2p", false, "tcp:// client: RFC 6581's peer-to-peer model (with an RTR indication)")
	fs.StringVar(&o.rtr, "rtr", "", "tcp:// client: the RTR indications to offer, in order (`list` of write, read, send); implies --p2p")
	fs.StringVar(&o.privateData, "private-data", "", "tcp://: Private Data (`text`) for the MPA Request or Reply")
	fs.IntVar(&o.ird, "ird", rping.DefaultIRD, "the IRD to offer (RDMA Reads the peer may have outstanding here)")
	fs.IntVar(&o.ord, "ord", rping.DefaultORD, "the ORD to offer (RDMA Reads this end may have outstanding)")
	fs.DurationVar(&o.firstDelay, "first-fpdu-delay", rpingFirstFPDUDelay, "tcp:// client: `pause` between the MPA Reply and the first FPDU (Linux siw's accept race)")
	o.link.Register(fs)
	return fs
}

func runRping(args []string, stdout, stderr io.Writer) error {
	var o rpingOptions
	fs := rpingFlags(&o, stderr)
	if err := parseFlags(fs, expandShortFlags(fs, args)); err != nil {
		return err
	}
	ep, err := o.check(fs)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.server {
		err = rpingServe(ctx, ep, &o, stdout, stderr)
	} else {
		err = rpingClient(ctx, ep, &o, stdout, stderr)
	}
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return nil // interrupted: rping's way to stop
	}
	return err
}

// check validates the flags and returns the endpoint.
func (o *rpingOptions) check(fs *flag.FlagSet) (endpoint.URL, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.server == o.client {
		return endpoint.URL{}, usagef("give -s (server) or -c (client)")
	}
	if fs.NArg() > 1 {
		return endpoint.URL{}, usagef("unexpected argument %q", fs.Arg(1))
	}
	if err := rping.CheckSize(o.size); err != nil {
		return endpoint.URL{}, usagef("-S: %v", err)
	}
	if o.count < 0 {
		return endpoint.URL{}, usagef("invalid count %d", o.count)
	}
	if o.port < 0 || o.port > 65535 || (o.port == 0 && o.client) {
		return endpoint.URL{}, usagef("-p: invalid port %d", o.port)
	}
	var ep endpoint.URL
	if fs.NArg() == 1 {
		if set["a"] || set["p"] {
			return endpoint.URL{}, usagef("give -a/-p or a URL, not both")
		}
		var err error
		if ep, err = endpoint.Parse(fs.Arg(0)); err != nil {
			return endpoint.URL{}, err
		}
	} else {
		if o.client && o.addr == "" {
			return endpoint.URL{}, usagef("the client needs the server's address: -a addr (or a URL)")
		}
		ep = endpoint.URL{Scheme: "tcp", Addr: net.JoinHostPort(o.addr, strconv.Itoa(o.port))}
	}
	if err := o.link.Check(ep, o.server); err != nil {
		return endpoint.URL{}, err
	}
	if o.server {
		// -C is ignored, as rping's server ignores it: it serves until
		// its client disconnects.
		for _, f := range []string{"rev", "p2p", "rtr", "first-fpdu-delay"} {
			if set[f] {
				return endpoint.URL{}, usagef("--%s is the client's: the server follows the client's MPA Request", f)
			}
		}
	} else if o.persistent {
		return endpoint.URL{}, usagef("-P is for the server (-s)")
	}
	if ep.Scheme == "sctp" {
		for _, f := range []string{"rev", "p2p", "rtr", "private-data", "first-fpdu-delay"} {
			if set[f] {
				return endpoint.URL{}, usagef("--%s applies to tcp:// only", f)
			}
		}
	}
	if o.rev != 1 && o.rev != 2 {
		return endpoint.URL{}, usagef("--rev must be 1 or 2")
	}
	if o.rtr != "" {
		o.p2p = true
		for _, s := range strings.Split(o.rtr, ",") {
			r, err := ddp.ParseRTR(strings.TrimSpace(s))
			if err != nil || r == ddp.RTRNone {
				return endpoint.URL{}, usagef("--rtr: %q is not write, read or send", s)
			}
			o.rtrs = append(o.rtrs, r)
		}
	}
	if len(o.rtrs) == 1 && o.rtrs[0] == ddp.RTRRead && o.ord == 0 {
		return endpoint.URL{}, usagef("--rtr read needs --ord 1 or more: the zero-length RDMA Read takes one")
	}
	if o.p2p && o.rev == 1 {
		return endpoint.URL{}, usagef("--p2p needs --rev 2: revision 1 has no RTR indication")
	}
	if o.rev == 1 && (set["ird"] || set["ord"]) {
		return endpoint.URL{}, usagef("--ird and --ord need --rev 2: revision 1 carries no IRD/ORD")
	}
	max := mpa.MaxPrivateData
	if o.rev == 2 {
		max -= mpa.EnhancedDataLen
	}
	if len(o.privateData) > max {
		return endpoint.URL{}, usagef("--private-data: %d octets, at most %d", len(o.privateData), max)
	}
	if o.ird < 0 || o.ord < 0 || o.ird > 128 || o.ord > 128 {
		return endpoint.URL{}, usagef("--ird and --ord must be between 0 and 128")
	}
	if o.firstDelay < 0 {
		return endpoint.URL{}, usagef("--first-fpdu-delay must not be negative")
	}
	return ep, nil
}

// mpaConfig is the MPA configuration the flags ask for.
func (o *rpingOptions) mpaConfig() *mpa.Config {
	c := &mpa.Config{Revision: o.rev, Markers: o.link.Markers, NoCRC: o.link.NoCRC, ClientServer: !o.p2p, RTR: o.rtrs}
	if o.privateData != "" {
		c.PrivateData = []byte(o.privateData)
	}
	if o.client {
		c.FirstFPDUDelay = o.firstDelay
	}
	return c
}

func (o *rpingOptions) config(stdout io.Writer) rping.Config {
	c := rping.Config{Size: o.size, Count: o.count, Validate: o.validate}
	if o.verbose {
		c.Verbose = stdout
	}
	if o.debug {
		c.Debug = stdout
	}
	return c
}

// lockedWriter serializes the lines of concurrent connections.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// describeConn is -d's line about a connection.
func describeConn(info endpoint.Info, c *mpa.Conn, qp *rdmap.QueuePair) string {
	s := info.String()
	if c != nil {
		n := c.Negotiated()
		switch {
		case !n.PeerToPeer:
			s += ", client-server"
		case n.RTR != ddp.RTRNone:
			s += fmt.Sprintf(", peer-to-peer, RTR %v", n.RTR)
		case n.LocalIRDORD != nil:
			// A responder learns which RTR comes when it comes: its Reply
			// took these.
			var took []string
			for _, r := range []ddp.RTR{ddp.RTRWrite, ddp.RTRRead, ddp.RTRSend} {
				e := *n.LocalIRDORD
				if (r == ddp.RTRWrite && e.WriteRTR) || (r == ddp.RTRRead && e.ReadRTR) || (r == ddp.RTRSend && e.SendRTR) {
					took = append(took, r.String())
				}
			}
			s += ", peer-to-peer, the Reply takes RTR " + strings.Join(took, " or ")
		}
		if len(n.PeerData) > 0 {
			s += fmt.Sprintf(", peer's private data %q", n.PeerData)
		}
	}
	ird, ord := qp.ReadLimits()
	return s + fmt.Sprintf(", IRD %d ORD %d", ird, ord)
}

func rpingClient(ctx context.Context, ep endpoint.URL, o *rpingOptions, stdout, stderr io.Writer) error {
	var rec *endpoint.Recorder
	if o.link.PCAP != "" {
		var err error
		if rec, err = endpoint.NewRecorder(o.link.PCAP, ep.Scheme); err != nil {
			return err
		}
	}
	e, err := rping.NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), o.ird, o.ord)
	if err != nil {
		rec.Close()
		return err
	}
	c, err := rping.NewClient(e, o.config(stdout))
	if err != nil {
		rec.Close()
		return err
	}
	o.link.MPA = o.mpaConfig()
	cn, err := endpoint.Dial(ctx, ep, &o.link, rec, e.QP, stderr)
	if err != nil {
		e.QP.Close(ctx)
		rec.Close()
		return err
	}
	if o.debug {
		fmt.Fprintln(stdout, "connected:", describeConn(cn.Info, cn.MPA(), e.QP))
	}
	err = cn.Explain(c.Run(ctx))
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	cn.Close(closeCtx)
	cancel()
	if o.debug {
		fmt.Fprintf(stdout, "client DISCONNECT EVENT... after %d pings\n", c.Pings())
	}
	if cerr := rec.Close(); err == nil {
		err = cerr
	}
	return err
}

func rpingServe(ctx context.Context, ep endpoint.URL, o *rpingOptions, stdout, stderr io.Writer) error {
	var rec *endpoint.Recorder
	if o.link.PCAP != "" {
		var err error
		if rec, err = endpoint.NewRecorder(o.link.PCAP, ep.Scheme); err != nil {
			return err
		}
	}
	o.link.MPA = o.mpaConfig()
	l, err := endpoint.Listen(ctx, ep, &o.link, rec, stderr)
	if err != nil {
		rec.Close()
		return fmt.Errorf("cannot listen on %s: %v", ep, err)
	}
	rec.SetLocal(l.Addr())
	if o.debug || l.Fingerprint != "" {
		fmt.Fprintf(stdout, "listening on %s://%s\n", ep.Scheme, l.Addr())
	}
	if l.Fingerprint != "" {
		fmt.Fprintln(stdout, "fingerprint sha-256", l.Fingerprint)
	}
	out := &lockedWriter{w: stdout}
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	var wg sync.WaitGroup
	var first error
	for n := 1; ; n++ {
		p, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() == nil {
				first = err
			}
			break
		}
		if !o.persistent {
			first = rpingServeConn(ctx, dev, p, n, o, out)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rpingServeConn(ctx, dev, p, n, o, out); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "iwarp rping: connection %d from %s: %v\n", n, p.Peer, err)
			}
		}()
	}
	l.Close()
	wg.Wait()
	if err := rec.Close(); first == nil {
		first = err
	}
	return first
}

// rpingServeConn serves one connection as rping's server thread does.
func rpingServeConn(ctx context.Context, dev *rdmap.Device, p *endpoint.Pending, n int, o *rpingOptions, stdout io.Writer) error {
	e, err := rping.NewEndpoint(dev, o.ird, o.ord)
	if err != nil {
		p.Reject()
		return err
	}
	s, err := rping.NewServer(e, o.config(stdout))
	if err != nil {
		p.Reject()
		return err
	}
	c, err := p.Accept(ctx, e.QP)
	if err != nil {
		e.QP.Close(ctx)
		return err
	}
	if o.debug {
		fmt.Fprintf(stdout, "conn %d: connected: %s\n", n, describeConn(c.Info, c.MPA(), e.QP))
	}
	err = c.Explain(s.Run(ctx))
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c.Close(closeCtx)
	cancel()
	if o.debug {
		fmt.Fprintf(stdout, "conn %d: server DISCONNECT EVENT... after %d pings\n", n, s.Pings())
	}
	return err
}
