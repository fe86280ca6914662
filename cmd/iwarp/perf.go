package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
	"github.com/iwarpgo/iwarp/rdmap"
)

func init() {
	register("perf", command{
		summary: "perftest-style bandwidth and latency of RDMA Write, Read, Send and Atomics",
		run:     runPerf,
	})
}

type perfOptions struct {
	listen, connect string
	op              string
	atomicType      string
	size            int
	all             bool
	iters           int
	duration        time.Duration
	lat             bool
	compareRaw      bool
	json            bool
	depth           int
	cqMod           int
	link            endpoint.Flags
	// Server.
	limits               perf.Limits
	memBudget, connBytes string
}

// perfClientFlags are the flags only the client takes.
var perfClientFlags = []string{"op", "atomic-type", "size", "all", "iters", "duration", "lat", "compare-raw", "json", "depth", "cq-mod"}

// perfServerFlags are the flags only the server takes.
var perfServerFlags = []string{"max-conns", "max-conns-per-peer", "mem-budget", "conn-budget", "idle-timeout"}

func runPerf(args []string, stdout, stderr io.Writer) error {
	if perftestRequested(args) {
		return runPerftest(args, stdout, stderr)
	}
	var o perfOptions
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, perfUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "", "serve: the `URL` to listen on")
	fs.StringVar(&o.connect, "connect", "", "measure: the `URL` of a perf server")
	fs.StringVar(&o.op, "op", "", "the operation: write, read, send or atomic")
	fs.StringVar(&o.atomicType, "atomic-type", "FETCH_AND_ADD", "--op atomic: FETCH_AND_ADD or CMP_AND_SWAP (perftest's -A)")
	fs.IntVar(&o.size, "size", 0, "message size in bytes (default 65536, or 2 with --lat, 8 for atomics)")
	fs.BoolVar(&o.all, "all", false, "run every size from 2 bytes up")
	fs.IntVar(&o.iters, "iters", 0, "iterations per size (default 5000 for write bandwidth, else 1000)")
	fs.DurationVar(&o.duration, "duration", 0, "run each size for this long instead of --iters")
	fs.BoolVar(&o.lat, "lat", false, "measure latency instead of bandwidth")
	fs.BoolVar(&o.compareRaw, "compare-raw", false, "also move the same bytes over the best plain TCP or SCTP stream and print the ratio")
	fs.BoolVar(&o.json, "json", false, "print one JSON result")
	fs.IntVar(&o.depth, "depth", 256, "bandwidth: operations outstanding at once")
	fs.IntVar(&o.cqMod, "cq-mod", 100, "bandwidth: a completion for every `N` operations (at most half of those outstanding)")
	fs.IntVar(&o.limits.MaxConns, "max-conns", perf.DefaultMaxConns, "server: connections served at once, in all")
	fs.IntVar(&o.limits.MaxConnsPerPeer, "max-conns-per-peer", perf.DefaultMaxConnsPerPeer, "server: connections served at once from one peer (an IPv4 address or an IPv6 /64)")
	fs.StringVar(&o.memBudget, "mem-budget", "512M", "server: octets of regions and buffers for all connections (K, M, G)")
	fs.StringVar(&o.connBytes, "conn-budget", "64M", "server: octets of regions and buffers one connection may hold (K, M, G)")
	fs.DurationVar(&o.limits.IdleTimeout, "idle-timeout", perf.DefaultIdleTimeout, "server: close a connection on which nothing moves for this long")
	fs.Bool("perftest", false, "speak perftest's rdma_cm protocol with ib_write_bw -R and the others (see iwarp perf --perftest -h)")
	o.link.Register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if (o.listen == "") == (o.connect == "") {
		return usagef("give one of --listen URL (server) or --connect URL (client)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.listen != "" {
		ep, err := endpoint.Parse(o.listen)
		if err != nil {
			return err
		}
		if err := o.link.Check(ep, true); err != nil {
			return err
		}
		if f := givenFlag(fs, perfClientFlags); f != "" {
			return usagef("the server (--listen) takes no test flags such as --%s; give them to the client", f)
		}
		if err := o.checkLimits(); err != nil {
			return err
		}
		return perfServe(ctx, ep, &o, stdout, stderr)
	}
	if f := givenFlag(fs, perfServerFlags); f != "" {
		return usagef("--%s is for the server (--listen)", f)
	}
	ep, err := endpoint.Parse(o.connect)
	if err != nil {
		return err
	}
	if err := o.link.Check(ep, false); err != nil {
		return err
	}
	cfg, err := o.clientConfig()
	if err != nil {
		return err
	}
	if flagGiven(fs, "atomic-type") && cfg.Op != perf.OpAtomic {
		return usagef("--atomic-type goes with --op atomic")
	}
	return perfClient(ctx, ep, &o, cfg, stdout, stderr)
}

// checkLimits parses and checks the server's limits.
func (o *perfOptions) checkLimits() error {
	var err error
	if o.limits.MemBudget, err = parseSize(o.memBudget); err != nil {
		return usagef("--mem-budget: %v", err)
	}
	if o.limits.ConnBudget, err = parseSize(o.connBytes); err != nil {
		return usagef("--conn-budget: %v", err)
	}
	if o.limits.MaxConns < 1 || o.limits.MaxConnsPerPeer < 1 {
		return usagef("--max-conns and --max-conns-per-peer must be at least 1")
	}
	if o.limits.IdleTimeout <= 0 {
		return usagef("--idle-timeout must be positive")
	}
	if err := o.limits.Check(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// clientConfig checks the client's flags and fills in the defaults.
func (o *perfOptions) clientConfig() (perf.ClientConfig, error) {
	var cfg perf.ClientConfig
	if o.op == "" {
		return cfg, usagef("--op write|read|send|atomic is required")
	}
	op, err := perf.ParseOp(o.op)
	if err != nil {
		return cfg, usagef("%v", err)
	}
	switch {
	case o.all && o.size != 0:
		return cfg, usagef("--size and --all exclude each other")
	case o.iters != 0 && o.duration != 0:
		return cfg, usagef("--iters and --duration exclude each other")
	case o.iters < 0 || o.duration < 0 || o.size < 0:
		return cfg, usagef("--size, --iters and --duration must be positive")
	case o.depth < 1 || o.depth > 1024:
		return cfg, usagef("--depth must be between 1 and 1024")
	case o.cqMod < 1:
		return cfg, usagef("--cq-mod must be at least 1")
	}
	switch strings.ToUpper(o.atomicType) {
	case "FETCH_AND_ADD":
		cfg.Atomic = rdmap.FetchAdd
	case "CMP_AND_SWAP":
		cfg.Atomic = rdmap.CmpSwap
	default:
		return cfg, usagef("--atomic-type %q: want FETCH_AND_ADD or CMP_AND_SWAP", o.atomicType)
	}
	if op == perf.OpAtomic {
		if o.all || (o.size != 0 && o.size != 8) {
			return cfg, usagef("an Atomic Operation moves 8 octets: no --size or --all")
		}
		o.size = 8
	}
	if o.size == 0 {
		o.size = 65536
		if o.lat {
			o.size = 2
		}
	}
	if o.size > perf.MaxSize {
		return cfg, usagef("--size at most %d", perf.MaxSize)
	}
	if o.iters == 0 && o.duration == 0 {
		o.iters = 1000
		if op == perf.OpWrite && !o.lat {
			o.iters = 5000
		}
	}
	sizes := o.sizes(op)
	cfg.Op, cfg.Lat, cfg.MaxSize = op, o.lat, sizes[len(sizes)-1]
	cfg.Iters, cfg.Duration, cfg.Depth, cfg.CQMod, cfg.CompareRaw = o.iters, o.duration, o.depth, o.cqMod, o.compareRaw
	return cfg, nil
}

// givenFlag returns the first of names given on the command line, or "".
func givenFlag(fs *flag.FlagSet, names []string) string {
	name := ""
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			if f.Name == n && name == "" {
				name = f.Name
			}
		}
	})
	return name
}

// sizes returns the message sizes of the run.
func (o *perfOptions) sizes(op perf.Op) []int {
	if !o.all {
		return []int{o.size}
	}
	top := perf.MaxSize
	if op == perf.OpSend {
		top = 1 << 20
	}
	var s []int
	for n := 2; n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// progress shows how far a run is, on a terminal only.
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
	shown bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

func (p *progress) begin() { p.start, p.last = time.Now(), time.Now() }

// update shows the fraction done, once the run has taken a second.
func (p *progress) update(size int, frac float64) {
	if !p.on {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last, p.shown = now, true
	fmt.Fprintf(p.w, "\r %-10d %5.1f%% ", size, 100*min(frac, 1))
}

func (p *progress) end() {
	if p.shown {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", 24)+"\r")
		p.shown = false
	}
}
