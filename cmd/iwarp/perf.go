package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

func init() {
	register("perf", command{
		summary: "perftest-style bandwidth and latency of RDMA Write, Read and Send",
		run:     runPerf,
	})
}

const perfUsage = `usage: iwarp perf --listen URL [flags]
       iwarp perf --connect URL --op write|read|send [--size N | --all]
                  [--iters N | --duration D] [--lat] [--compare-raw] [--json]

Measures RDMA Write, RDMA Read and Send over MPA/TCP (tcp://) or DDP over
SCTP over DTLS (sctp://), as perftest's ib_write_bw, ib_read_lat and so on
do for RDMA hardware. One side serves (--listen), the other measures
(--connect).

Bandwidth (the default) keeps up to --depth operations outstanding (RDMA
Reads: up to the negotiated ORD), posts each window's worth as one list
(QueuePair.PostBatch), asks for a completion only every --cq-mod
operations as perftest does (every half window at most, so that the
pipeline never runs dry), and prints perftest's columns:
	#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
MB is 2^20 bytes, as in perftest. The time runs from the first operation
to the peer's answer to a message sent after the last one, so everything
has landed. Peak is the best rate over any stretch of at least a
twentieth of the run that moves at least 16 MiB (Writes and Sends
complete as fast as the sockets buffer them, and a window of Read
Responses waits in them); for Write and Send stretches also start after
the first 16 MiB. In shorter runs the peak is the average.

Latency (--lat) prints, in microseconds:
	#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
Send latency is half a Send ping-pong's round trip; Write latency half the
round trip of an RDMA Write followed by a zero-length Send that tells the
peer it has landed (the peer answers the same way; perftest polls memory
instead, which Go cannot do safely); Read latency is a whole RDMA Read.

--compare-raw also moves the same bytes, in the same run, over a plain TCP
connection (with CRC32c computed on both sides when the MPA connection
uses CRCs) or over an SCTP stream of another DTLS/SCTP association with
the same tuning, in messages as large as DDP Segments (each still framed
with a DDP-SSN and a DDP header that nothing interprets: no placement, no
RDMAP), and prints the ratio iWARP/raw of the bandwidths. With --lat it
makes round trips instead: the same bytes there and back (Send, Write),
or a 28-byte request there and the bytes back (Read), and prints the
ratio iWARP/raw of the typical latencies. The two alternate in 5 rounds
of a fifth of the iterations each; the ratio is the median of the
rounds' ratios, which a shared machine's drifting speed disturbs far less
than one long run of each.

--perftest talks to perftest's own programs instead (ib_write_bw -R,
ib_read_bw -R, ib_send_bw -R, ib_send_lat -R, ib_read_lat -R, and the
client of ib_write_lat -R), on perftest's port 18515:
iwarp perf --perftest -h says how.

Defaults follow perftest: --size 65536 for bandwidth and 2 for latency;
--iters 5000 for Write bandwidth, 1000 otherwise. --all runs sizes 2, 4, ...
up to 8 MiB (1 MiB for Send). On a terminal a progress indicator shows
during long runs.

Examples:
	iwarp perf --listen tcp://:4791
	iwarp perf --connect tcp://server:4791 --op write
	iwarp perf --connect tcp://server:4791 --op send --lat --all
	iwarp perf --connect sctp://server:4792 --fingerprint AB:CD:.. --op read --duration 5s
	iwarp perf --connect tcp://server:4791 --op write --compare-raw --json
	iwarp perf --connect tcp://server:4791 --op send --lat --size 64 --compare-raw

With --json the client prints one JSON object when done:
	{"transport":"tcp","url":"tcp://..","op":"write","test":"bw"|"lat",
	 "results":[{"bytes":65536,"iterations":5000,"seconds":0.5,
	   "bw_peak_mbs":..,"bw_avg_mbs":..,"msg_rate_mpps":..,
	   "lat_usec":{"min":..,"max":..,"typical":..,"avg":..,"stdev":..,
	               "p99":..,"p99_9":..},        (--lat)
	   "raw":{"transport":"tcp","bytes":..,"iterations":..,"seconds":..,
	          "bw_avg_mbs":..,"crc32c":true,"rounds":5,
	          "lat_usec":{..}},                 (--compare-raw; lat_usec with --lat)
	   "ratio":0.8}]}                           (--compare-raw)

Flags:
`

type perfOptions struct {
	listen, connect string
	op              string
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
}

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
	fs.StringVar(&o.op, "op", "", "the operation: write, read or send")
	fs.IntVar(&o.size, "size", 0, "message size in bytes (default 65536, or 2 with --lat)")
	fs.BoolVar(&o.all, "all", false, "run every size from 2 bytes up")
	fs.IntVar(&o.iters, "iters", 0, "iterations per size (default 5000 for write bandwidth, else 1000)")
	fs.DurationVar(&o.duration, "duration", 0, "run each size for this long instead of --iters")
	fs.BoolVar(&o.lat, "lat", false, "measure latency instead of bandwidth")
	fs.BoolVar(&o.compareRaw, "compare-raw", false, "also move the same bytes over plain TCP or SCTP and print the ratio")
	fs.BoolVar(&o.json, "json", false, "print one JSON result")
	fs.IntVar(&o.depth, "depth", 128, "bandwidth: operations outstanding at once")
	fs.IntVar(&o.cqMod, "cq-mod", 100, "bandwidth: a completion for every `N` operations (at most half of those outstanding)")
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
		if f := clientFlag(fs); f != "" {
			return usagef("the server (--listen) takes no test flags such as --%s; give them to the client", f)
		}
		return perfServe(ctx, ep, &o, stdout, stderr)
	}
	ep, err := parseEndpoint(o.connect)
	if err != nil {
		return err
	}
	if err := o.link.check(ep, false); err != nil {
		return err
	}
	switch o.op {
	case "write", "read", "send":
	case "":
		return usagef("--op write|read|send is required")
	default:
		return usagef("--op %q: want write, read or send", o.op)
	}
	if o.all && o.size != 0 {
		return usagef("--size and --all exclude each other")
	}
	if o.iters != 0 && o.duration != 0 {
		return usagef("--iters and --duration exclude each other")
	}
	if o.iters < 0 || o.duration < 0 || o.size < 0 {
		return usagef("--size, --iters and --duration must be positive")
	}
	if o.depth < 1 || o.depth > 1024 {
		return usagef("--depth must be between 1 and 1024")
	}
	if o.cqMod < 1 {
		return usagef("--cq-mod must be at least 1")
	}
	if o.size == 0 {
		o.size = 65536
		if o.lat {
			o.size = 2
		}
	}
	if o.size > maxPerfSize {
		return usagef("--size at most %d", maxPerfSize)
	}
	if o.iters == 0 && o.duration == 0 {
		o.iters = 1000
		if o.op == "write" && !o.lat {
			o.iters = 5000
		}
	}
	return perfClient(ctx, ep, &o, stdout, stderr)
}

const maxPerfSize = 8 << 20

// perfReadDepth is the IRD and ORD of perf's queue pairs: Linux siw's
// limit (SIW_MAX_IRD_QP, SIW_MAX_ORD_QP), which perftest, asking the
// device, uses for the RDMA Reads it keeps outstanding.
const perfReadDepth = 128

// clientFlag returns the name of a flag given that only the client takes,
// or "".
func clientFlag(fs *flag.FlagSet) string {
	name := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "op", "size", "all", "iters", "duration", "lat", "compare-raw", "json", "depth", "cq-mod":
			if name == "" {
				name = f.Name
			}
		}
	})
	return name
}

// sizes returns the message sizes of the run.
func (o *perfOptions) sizes() []int {
	if !o.all {
		return []int{o.size}
	}
	top := maxPerfSize
	if o.op == "send" {
		top = 1 << 20
	}
	var s []int
	for n := 2; n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// The perf control messages are Sends of ctlLen bytes starting with
// ctlMagic; data Sends are told apart by their length or first bytes
// (data buffers start with bytes 0, 1, 2, 3).
const (
	ctlLen   = 32
	ctlMagic = 0x49575046 // "IWPF"
)

// Control message types.
const (
	ctlHello  = 1 // client: max size, receive depth, its region
	ctlAdvert = 2 // server: its region and raw ports
	ctlStart  = 3 // client: op, mode, size of the next test
	ctlDone   = 4 // client: the test's operations are all posted
	ctlAck    = 5 // server: answer to start and done
	ctlCredit = 6 // server: n more Sends may come
)

// perfCtl is a control message:
//
//	magic u32 | type u8 | op u8 | lat u8 | crc u8 | size u32 | n u32 |
//	stag u32 | to u64 | port u16 | port2 u16
type perfCtl struct {
	typ, op, lat, crc uint8
	size, n           uint32
	stag              uint32
	to                uint64
	port, port2       uint16
}

func (c *perfCtl) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], ctlMagic)
	b[4], b[5], b[6], b[7] = c.typ, c.op, c.lat, c.crc
	binary.BigEndian.PutUint32(b[8:], c.size)
	binary.BigEndian.PutUint32(b[12:], c.n)
	binary.BigEndian.PutUint32(b[16:], c.stag)
	binary.BigEndian.PutUint64(b[20:], c.to)
	binary.BigEndian.PutUint16(b[28:], c.port)
	binary.BigEndian.PutUint16(b[30:], c.port2)
}

func parseCtl(b []byte) (perfCtl, bool) {
	if len(b) != ctlLen || binary.BigEndian.Uint32(b) != ctlMagic {
		return perfCtl{}, false
	}
	return perfCtl{typ: b[4], op: b[5], lat: b[6], crc: b[7],
		size: binary.BigEndian.Uint32(b[8:]), n: binary.BigEndian.Uint32(b[12:]),
		stag: binary.BigEndian.Uint32(b[16:]), to: binary.BigEndian.Uint64(b[20:]),
		port: binary.BigEndian.Uint16(b[28:]), port2: binary.BigEndian.Uint16(b[30:])}, true
}

var opCodes = map[string]uint8{"write": 1, "read": 2, "send": 3}

// fillPattern fills b with the data pattern (first bytes 0, 1, 2, 3, so
// never a control message).
func fillPattern(b []byte) {
	for i := range b {
		b[i] = byte(i % 251)
	}
}

// recvBuffers is a set of receive buffers posted and reposted on a queue
// pair, WRIDs base+i.
type recvBuffers struct {
	qp   *rdmap.QueuePair
	mrs  []*rdmap.MemoryRegion
	base uint64
}

func newRecvBuffers(pd *rdmap.ProtectionDomain, qp *rdmap.QueuePair, n, size int, base uint64) (*recvBuffers, error) {
	r := &recvBuffers{qp: qp, base: base}
	for i := 0; i < n; i++ {
		mr, err := pd.RegisterMemory(make([]byte, size), 0, rdmap.LocalWrite)
		if err != nil {
			return nil, err
		}
		r.mrs = append(r.mrs, mr)
		if err := r.post(i); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *recvBuffers) post(i int) error {
	return r.qp.PostRecv(rdmap.RecvWR{ID: r.base + uint64(i), SGL: []rdmap.SGE{{MR: r.mrs[i], Length: uint32(r.mrs[i].Len())}}})
}

// take returns the bytes of a receive completion's buffer and reposts it
// once done is called.
func (r *recvBuffers) take(c rdmap.Completion) ([]byte, func() error) {
	i := int(c.WRID - r.base)
	return r.mrs[i].Bytes()[:c.ByteLen], func() error { return r.post(i) }
}

func (r *recvBuffers) close() {
	for _, mr := range r.mrs {
		mr.Deregister()
	}
}

// waitEither returns a completion of scq if one is there, or else waits
// for one of rcq (the same CQ, or one that the caller only waits on).
func waitEither(ctx context.Context, scq, rcq *rdmap.CompletionQueue) (rdmap.Completion, error) {
	if scq != rcq {
		var one [1]rdmap.Completion
		if scq.Poll(one[:]) == 1 {
			return one[0], nil
		}
	}
	return rcq.Wait(ctx)
}

// sendCtl posts a control message from a small registered buffer.
func sendCtl(qp *rdmap.QueuePair, mr *rdmap.MemoryRegion, id uint64, c perfCtl) error {
	buf := make([]byte, ctlLen)
	c.put(buf)
	copy(mr.Bytes(), buf)
	return qp.PostSend(rdmap.SendWR{ID: id, SGL: []rdmap.SGE{{MR: mr, Length: ctlLen}}, Inline: true})
}

// perfStats is one size's result.
type perfStats struct {
	Bytes      int       `json:"bytes"`
	Iterations int       `json:"iterations"`
	Seconds    float64   `json:"seconds"`
	BWPeak     float64   `json:"bw_peak_mbs"`
	BWAvg      float64   `json:"bw_avg_mbs"`
	MsgRate    float64   `json:"msg_rate_mpps"`
	Lat        *latStats `json:"lat_usec,omitempty"`
	Raw        *rawStats `json:"raw,omitempty"`
	Ratio      *float64  `json:"ratio,omitempty"`
}

type latStats struct {
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Typical float64 `json:"typical"`
	Avg     float64 `json:"avg"`
	Stdev   float64 `json:"stdev"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p99_9"`
}

type rawStats struct {
	Transport  string    `json:"transport"`
	Bytes      int       `json:"bytes"`
	Iterations int       `json:"iterations"`
	Seconds    float64   `json:"seconds"`
	BWAvg      float64   `json:"bw_avg_mbs"`
	CRC32c     bool      `json:"crc32c,omitempty"`
	Rounds     int       `json:"rounds"`
	Lat        *latStats `json:"lat_usec,omitempty"`
}

const mib = 1 << 20

// latencies summarises samples (in µs) as perftest does.
func latencies(samples []float64) *latStats {
	if len(samples) == 0 {
		return &latStats{}
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		sq += (v - avg) * (v - avg)
	}
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return &latStats{Min: s[0], Max: s[len(s)-1], Typical: s[len(s)/2], Avg: avg,
		Stdev: math.Sqrt(sq / float64(len(s))), P99: pct(0.99), P999: pct(0.999)}
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
