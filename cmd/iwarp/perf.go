package main

import (
	"context"
	"flag"
	"fmt"
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

const perfUsage = `usage: iwarp perf --listen URL [flags]
       iwarp perf --connect URL --op write|read|send|atomic [--size N | --all]
                  [--iters N | --duration D] [--lat] [--compare-raw] [--json]

Measures RDMA Write, RDMA Read, Send and RFC 7306's Atomic Operations over
MPA/TCP (tcp://) or DDP over SCTP over DTLS (sctp://), as perftest's
ib_write_bw, ib_read_lat, ib_atomic_bw and so on do for RDMA hardware. One
side serves (--listen), the other measures (--connect).

Bandwidth (the default) keeps up to --depth operations outstanding (RDMA
Reads and Atomics: up to the ORD and the server's IRD, both 256), posts each
window's worth as one list (QueuePair.PostBatch), asks for a completion
only every --cq-mod operations as perftest does (every half window at
most, so that the pipeline never runs dry), and prints perftest's columns:
	#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
MB is 2^20 bytes, as in perftest. The time runs from the first operation
to the peer's answer to a message sent after the last one, so everything
has landed. Peak is the best rate over any stretch of at least a
twentieth of the run that moves at least 16 MiB (Writes and Sends
complete as fast as the sockets buffer them, and a window of Read
Responses waits in them); for Write and Send stretches also start after
the first 16 MiB. In shorter runs the peak is the average. The window
of 256 is twice perftest's against Linux siw, whose IRD and ORD are 128:
128 RDMA Reads of 64 KiB left the stream short between two processes
(docs/performance.md). --depth 128 measures as perftest would.

Latency (--lat) prints, in microseconds:
	#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
Send latency is half a Send ping-pong's round trip; Write latency half the
round trip of an RDMA Write followed by a zero-length Send that tells the
peer it has landed (the peer answers the same way; perftest polls memory
instead, which Go cannot do safely); Read and Atomic latency is a whole
RDMA Read or Atomic Operation.

--op atomic runs FetchAdds of 1 (or, with --atomic-type CMP_AND_SWAP,
CmpSwaps) on an 8-octet word of the server's, as ib_atomic_bw and
ib_atomic_lat do: #bytes is 8, the rate the column that matters.

--compare-raw also moves the same bytes, in the same run, over the best
plain stream the raw transport offers. Over tcp:// that is one TCP
connection carrying the messages back to back, each followed by its
CRC32c when the MPA connection uses CRCs (computed by the sender and
checked by the receiver, as MPA does per FPDU), written many at a time
(messages of 16 KiB and more gathered straight from the source into
writev calls of up to 4 MiB, smaller ones copied into 1 MiB writes) and
read up to 1 MiB at a time. Over sctp:// it is an SCTP stream of another
DTLS/SCTP association with the same configuration, carrying messages as
large as DDP Segments may be (the MULPDU) with nothing but a DDP-SSN in
front: no DDP header, placement or RDMAP. It prints the ratio iWARP/raw
of the bandwidths. With --lat it makes round trips instead, one at a time:
the same bytes there and back (Send, Write), a Read Request's 28 octets
there and the bytes back (Read), an Atomic Request's 52 octets there and
an Atomic Response's 12 back (Atomic), with the same CRCs; and prints the
ratio iWARP/raw of the typical latencies. An atomic bandwidth test is
compared with those exchanges kept as many outstanding as the Atomics. The
two alternate in 5 rounds of a fifth of the iterations each; the ratio is
the median of the rounds' ratios, which a shared machine's drifting speed
disturbs far less than one long run of each.

The server sizes nothing from the client's word alone. A client's hello
says what its tests need (the region it writes, reads or operates on,
receive buffers, the raw transfers' 2 MiB of buffers); the server grants
it only within --conn-budget per connection and --mem-budget in all
(each connection counted 1 MiB for itself besides), in a protection
domain limited to what was granted, and serves --max-conns connections
at once, --max-conns-per-peer from one peer (an IPv4 address or an
IPv6 /64). Beyond a limit the client is told why, and prints it; the
server prints each refusal on stderr, at most 100 at once and 10 a
second after that, and counts those it did not print. A connection that
sends no hello within 10 s, or on which nothing moves for
--idle-timeout, is closed.
The raw listener serves only clients with a live perf connection (its
advert gives a token), within what that connection was granted, one
transfer at a time, under the same connection limits and timeouts.

--perftest talks to perftest's own programs instead (ib_write_bw -R,
ib_read_bw -R, ib_send_bw -R, ib_send_lat -R, ib_read_lat -R, and the
client of ib_write_lat -R), on perftest's port 18515:
iwarp perf --perftest -h says how.

Defaults follow perftest: --size 65536 for bandwidth and 2 for latency
(8 for atomics); --iters 5000 for Write bandwidth, 1000 otherwise. --all
runs sizes 2, 4, ... up to 8 MiB (1 MiB for Send). On a terminal a
progress indicator shows during long runs.

Examples:
	iwarp perf --listen tcp://:4791
	iwarp perf --connect tcp://server:4791 --op write
	iwarp perf --connect tcp://server:4791 --op send --lat --all
	iwarp perf --connect sctp://server:4792 --fingerprint AB:CD:.. --op read --duration 5s
	iwarp perf --connect tcp://server:4791 --op write --compare-raw --json
	iwarp perf --connect tcp://server:4791 --op send --lat --size 64 --compare-raw
	iwarp perf --connect tcp://server:4791 --op atomic --lat --compare-raw

With --json the client prints one JSON object when done:
	{"transport":"tcp","url":"tcp://..","op":"write","test":"bw"|"lat",
	 "results":[{"bytes":65536,"iterations":5000,"seconds":0.5,
	   "bw_peak_mbs":..,"bw_avg_mbs":..,"msg_rate_mpps":..,
	   "lat_usec":{"min":..,"max":..,"typical":..,"avg":..,"stdev":..,
	               "p99":..,"p99_9":..},        (--lat)
	   "raw":{"transport":"tcp","bytes":..,"iterations":..,"seconds":..,
	          "bw_avg_mbs":..,"crc32c":true,"rounds":5,"method":"..",
	          "lat_usec":{..}},                 (--compare-raw; lat_usec with --lat)
	   "ratio":0.8}]}                           (--compare-raw)

Flags:
`

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
	link            linkFlags
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
	o.link.register(fs)
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
		ep, err := parseEndpoint(o.listen)
		if err != nil {
			return err
		}
		if err := o.link.check(ep, true); err != nil {
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
	ep, err := parseEndpoint(o.connect)
	if err != nil {
		return err
	}
	if err := o.link.check(ep, false); err != nil {
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
