// Llpbench measures one-way bulk transfer of 64 KiB messages between two
// processes over iwarp's sctp:// and tcp:// RDMA Writes and over the
// transports they are measured against: quic-go, raw pion/dtls records,
// pion/sctp over pion/dtls, plain TCP and TLS 1.3 over TCP.
//
// It re-runs itself as the receiving server (or, with -listen and
// -connect, runs as either end), alternates the transports round by
// round (A B C A B C ...), and reports for each transfer the bytes the
// receiver verified per second and the CPU seconds both processes spent
// per GB (getrusage RUSAGE_SELF of each, summed), as JSON lines and a
// table of medians; each transport's ratio to quic-go is taken within
// each round and the ratios' median reported.
//
// The impairment flags (-delay, -jitter, -loss, -dup, -rate, -outage-at)
// put the UDP transports through package impair's proxy, and the TCP
// ones through a relay with the same delay, in a third process whose CPU
// time is not counted.
//
//	go run ./cmd/llpbench -duration 2s -rounds 5
//	go run ./cmd/llpbench -delay 10ms -duration 3s
//	go run ./cmd/llpbench -loss 20 -size 4MiB -transports iwarp-sctp-8000,quic,pion-sctp
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/iwarpgo/iwarp/bench/impair"
	"github.com/iwarpgo/iwarp/bench/llp"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llpbench:", err)
		os.Exit(1)
	}
}

type options struct {
	transports string
	rounds     int
	duration   time.Duration
	size       string
	timeout    time.Duration
	jsonFile   string

	delay, jitter         time.Duration
	loss, dup             float64
	rate                  float64
	outageAt, outageFor   time.Duration
	seed                  uint64
	proxy                 bool
	listen, connect       string
	serveHelper, relayArg string
}

func (o *options) impaired() bool {
	return o.proxy || o.delay > 0 || o.jitter > 0 || o.loss > 0 || o.dup > 0 || o.rate > 0 || o.outageFor > 0
}

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("llpbench", flag.ContinueOnError)
	names := make([]string, 0)
	for _, t := range llp.All() {
		names = append(names, t.Name)
	}
	var extra []string
	for _, t := range llp.Extra() {
		extra = append(extra, t.Name)
	}
	fs.StringVar(&o.transports, "transports", strings.Join(names, ","), "comma-separated transports, in the order of each round (also: "+strings.Join(extra, ", ")+")")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; each transport runs once per round")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "how long each transfer sends")
	fs.StringVar(&o.size, "size", "", "send this much per transfer instead (4MiB, 1GB, 65536)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up on a transfer after this long, set-up included (what arrived by then is reported, marked failed)")
	fs.StringVar(&o.jsonFile, "json", "", "also write JSON lines (one per transfer, one summary per transport) to `FILE` (- for standard output)")
	fs.DurationVar(&o.delay, "delay", 0, "delay each way (UDP proxy and TCP relay)")
	fs.DurationVar(&o.jitter, "jitter", 0, "jitter each way, ± (UDP)")
	fs.Float64Var(&o.loss, "loss", 0, "loss each way, percent (UDP)")
	fs.Float64Var(&o.dup, "dup", 0, "duplication each way, percent (UDP)")
	fs.Float64Var(&o.rate, "rate", 0, "bandwidth cap each way, MB/s (UDP; 0: none)")
	fs.DurationVar(&o.outageAt, "outage-at", 0, "an outage (UDP, both ways) this long after each connection's first datagram")
	fs.DurationVar(&o.outageFor, "outage-for", 0, "how long the outage drops everything")
	fs.BoolVar(&o.proxy, "proxy", false, "go through the proxy and relay even with no impairment (what they cost)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the proxy's losses, duplicates and jitter")
	fs.StringVar(&o.listen, "listen", "", "run only the server, its control connection at `ADDR` (127.0.0.1:7000)")
	fs.StringVar(&o.connect, "connect", "", "run only the client, against a server started with -listen at `ADDR`")
	fs.StringVar(&o.serveHelper, "serve-helper", "", "(internal) run as the re-run server")
	fs.StringVar(&o.relayArg, "relay-helper", "", "(internal) run as the relay")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case o.serveHelper != "":
		return serve(o.serveHelper, untilStdinCloses())
	case o.relayArg != "":
		return relay(o.relayArg, untilStdinCloses())
	case o.listen != "":
		return serve(o.listen, make(chan struct{}))
	}
	if o.rounds < 1 || o.rounds > 1000 {
		return errors.New("-rounds must be from 1 to 1000")
	}
	ts, err := llp.ByName(strings.Split(o.transports, ","))
	if err != nil {
		return err
	}
	var msgs int
	if o.size != "" {
		n, err := parseSize(o.size)
		if err != nil {
			return err
		}
		msgs = int((n + llp.MessageSize - 1) / llp.MessageSize)
	}
	if msgs == 0 && (o.duration <= 0 || o.duration > time.Hour) {
		return errors.New("-duration must be from 1ns to 1h")
	}

	var h hello
	ctl := o.connect
	if ctl == "" {
		srv, err := startChild(&h, "-serve-helper", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer srv.stop()
		ctl = h.Control
	}
	c, err := dialControl(ctl)
	if err != nil {
		return err
	}
	defer c.conn.Close()
	h = c.hello
	sec, err := h.security()
	if err != nil {
		return err
	}
	addrs := h.Listeners
	if o.impaired() {
		fronts, stop, err := startRelay(&o, ts, addrs)
		if err != nil {
			return err
		}
		defer stop()
		addrs = fronts
	}

	var js io.Writer
	switch o.jsonFile {
	case "":
	case "-":
		js = stdout
	default:
		f, err := os.Create(o.jsonFile)
		if err != nil {
			return err
		}
		defer f.Close()
		js = f
	}
	sum := newSummary(ts)
	fmt.Fprintf(os.Stderr, "llpbench: %d rounds of %s, each %s%s\n", o.rounds, strings.Join(transportNames(ts), " "), amount(&o, msgs), o.pathString())
	for round := 1; round <= o.rounds; round++ {
		var rs []result
		for _, t := range ts {
			r := c.transfer(&o, t, addrs[t.Name], sec, msgs)
			r.Round = round
			rs = append(rs, r)
			fmt.Fprintf(os.Stderr, "  round %d %-16s %s\n", round, t.Name, r.line())
		}
		pairRatios(rs)
		for _, r := range rs {
			if js != nil {
				b, _ := json.Marshal(r)
				fmt.Fprintf(js, "%s\n", b)
			}
			sum.add(r)
		}
	}
	if js != nil {
		for _, s := range sum.rows() {
			b, _ := json.Marshal(s)
			fmt.Fprintf(js, "%s\n", b)
		}
	}
	sum.table(stdout, &o, msgs)
	return nil
}

func transportNames(ts []llp.Transport) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func amount(o *options, msgs int) string {
	if msgs > 0 {
		return fmt.Sprintf("%d messages of 64 KiB", msgs)
	}
	return o.duration.String()
}

func (o *options) pathString() string {
	if !o.impaired() {
		return ", loopback"
	}
	p := []string{"through the proxy"}
	if o.delay > 0 {
		p = append(p, fmt.Sprintf("delay %v each way", o.delay))
	}
	if o.jitter > 0 {
		p = append(p, fmt.Sprintf("jitter ±%v", o.jitter))
	}
	if o.loss > 0 {
		p = append(p, fmt.Sprintf("loss %g %% each way", o.loss))
	}
	if o.dup > 0 {
		p = append(p, fmt.Sprintf("duplication %g %%", o.dup))
	}
	if o.rate > 0 {
		p = append(p, fmt.Sprintf("cap %g MB/s", o.rate))
	}
	if o.outageFor > 0 {
		p = append(p, fmt.Sprintf("outage %v at %v", o.outageFor, o.outageAt))
	}
	return ", " + strings.Join(p, ", ") + " (seed " + strconv.FormatUint(o.seed, 10) + ")"
}

// parseSize reads 4MiB, 1GB, 512KiB, 65536.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 || n*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("bad -size %q", s)
	}
	return int64(n * float64(mult)), nil
}

// startRelay runs the relay helper in front of the transports' listeners
// and returns the address to dial for each transport.
func startRelay(o *options, ts []llp.Transport, addrs map[string]string) (map[string]string, func(), error) {
	link := impair.Link{Delay: o.delay, Jitter: o.jitter, Loss: o.loss / 100, Duplicate: o.dup / 100, Rate: int64(o.rate * 1e6)}
	spec := relaySpec{
		Config:   impair.Config{Up: link, Down: link, Seed: o.seed, OutageAt: o.outageAt, OutageFor: o.outageFor},
		TCPDelay: o.delay,
	}
	for _, t := range ts {
		if t.Network == "udp" {
			spec.UDP = append(spec.UDP, addrs[t.Name])
		} else {
			spec.TCP = append(spec.TCP, addrs[t.Name])
		}
	}
	b, _ := json.Marshal(spec)
	var fronts relayFronts
	ch, err := startChild(&fronts, "-relay-helper", string(b))
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]string)
	for _, t := range ts {
		out[t.Name] = fronts[addrs[t.Name]]
	}
	return out, ch.stop, nil
}

// control is the client's end of the control connection.
type control struct {
	conn  net.Conn
	sc    *bufio.Scanner
	enc   *json.Encoder
	hello hello
}

func dialControl(addr string) (*control, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := &control{conn: conn, sc: bufio.NewScanner(conn), enc: json.NewEncoder(conn)}
	c.sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !c.sc.Scan() {
		conn.Close()
		return nil, fmt.Errorf("control %s: no hello: %v", addr, c.sc.Err())
	}
	if err := json.Unmarshal(c.sc.Bytes(), &c.hello); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *control) call(req request) (reply, error) {
	c.conn.SetDeadline(time.Now().Add(3 * llp.Stalled))
	if err := c.enc.Encode(req); err != nil {
		return reply{}, err
	}
	if !c.sc.Scan() {
		return reply{}, fmt.Errorf("control: %v", c.sc.Err())
	}
	var rep reply
	if err := json.Unmarshal(c.sc.Bytes(), &rep); err != nil {
		return reply{}, err
	}
	if rep.Err != "" {
		return rep, errors.New(rep.Err)
	}
	return rep, nil
}

// result is one transfer.
type result struct {
	Round     int     `json:"round"`
	Transport string  `json:"transport"`
	Sent      int64   `json:"sent"`
	Verified  int64   `json:"verified"`
	Dups      int64   `json:"dups,omitempty"`
	Seconds   float64 `json:"seconds"`
	MBs       float64 `json:"mb_s"`
	CPUClient float64 `json:"cpu_client_s"`
	CPUServer float64 `json:"cpu_server_s"`
	CPUPerGB  float64 `json:"cpu_s_per_gb"`
	LostPct   float64 `json:"lost_pct"`
	RatioQUIC float64 `json:"ratio_mb_s_vs_quic,omitempty"`
	CPURatio  float64 `json:"ratio_cpu_per_gb_vs_quic,omitempty"`
	Err       string  `json:"err,omitempty"`
}

func (r result) line() string {
	s := fmt.Sprintf("%8.1f MB/s %6.2f CPU s/GB  %d/%d bytes", r.MBs, r.CPUPerGB, r.Verified, r.Sent)
	if r.Err != "" {
		s += "  error: " + r.Err
	}
	return s
}

// transfer runs one transfer of t: connect, send for the duration (or
// msgs messages), wait for the receiver to have verified it all.
func (c *control) transfer(o *options, t llp.Transport, addr string, sec *llp.Security, msgs int) result {
	r := result{Transport: t.Name}
	fail := func(err error) result {
		r.Err = err.Error()
		return r
	}
	if _, err := c.call(request{Op: "prepare", Transport: t.Name}); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	s, err := t.Dial(ctx, addr, sec)
	if err != nil {
		return fail(fmt.Errorf("dial: %w", err))
	}
	// A write blocked past the timeout ends with the connection; a close
	// that the path makes slow is not waited for long.
	var closeOnce sync.Once
	closeSender := func() { closeOnce.Do(func() { s.Close() }) }
	stop := context.AfterFunc(ctx, closeSender)
	defer func() {
		stop()
		done := make(chan struct{})
		go func() { closeSender(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}()
	if _, err := c.call(request{Op: "start", Transport: t.Name}); err != nil {
		return fail(err)
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	// The sending runs in a goroutine of its own, given up on at the
	// timeout: a transport may block a write in a way its context does
	// not reach.
	var sent atomic.Int64
	sendDone := make(chan error, 1)
	go func() {
		var err error
		if msgs > 0 {
			for left := msgs; left > 0 && err == nil; left -= llp.Batch {
				err = s.Send(ctx, min(left, llp.Batch))
				sent.Store(s.Sent())
			}
		} else {
			for time.Since(start) < o.duration && err == nil {
				err = s.Send(ctx, llp.Batch)
				sent.Store(s.Sent())
			}
		}
		sendDone <- err
	}()
	var sendErr error
	select {
	case sendErr = <-sendDone:
	case <-ctx.Done():
		sendErr = ctx.Err()
	}
	r.Sent = sent.Load()
	within := time.Second
	if dl, ok := ctx.Deadline(); ok {
		within = max(within, time.Until(dl))
	}
	rep, err := c.call(request{Op: "end", Transport: t.Name, Sent: r.Sent, Lossy: t.Lossy, Within: within})
	r.CPUClient = cpuSeconds() - cpu0
	r.CPUServer = rep.CPU
	r.Verified, r.Dups = rep.Verified, rep.Dups
	if rep.LastNano > 0 {
		r.Seconds = time.Unix(0, rep.LastNano).Sub(start).Seconds()
	}
	if r.Seconds > 0 {
		r.MBs = float64(r.Verified) / 1e6 / r.Seconds
	}
	if r.Verified > 0 {
		r.CPUPerGB = (r.CPUClient + r.CPUServer) / (float64(r.Verified) / 1e9)
	}
	if r.Sent > 0 {
		r.LostPct = 100 * float64(r.Sent-r.Verified) / float64(r.Sent)
	}
	switch {
	case sendErr != nil:
		r.Err = "send: " + sendErr.Error()
	case err != nil:
		r.Err = err.Error()
	case !t.Lossy && r.Verified != r.Sent:
		r.Err = fmt.Sprintf("verified %d of %d bytes", r.Verified, r.Sent)
	}
	return r
}

// pairRatios sets each result's ratios to the round's quic-go transfer.
func pairRatios(rs []result) {
	i := slices.IndexFunc(rs, func(r result) bool { return r.Transport == "quic" })
	if i < 0 || rs[i].Err != "" || rs[i].MBs == 0 || rs[i].CPUPerGB == 0 {
		return
	}
	q := rs[i]
	for k := range rs {
		if rs[k].Err == "" && rs[k].MBs > 0 {
			rs[k].RatioQUIC = rs[k].MBs / q.MBs
			rs[k].CPURatio = rs[k].CPUPerGB / q.CPUPerGB
		}
	}
}

// summary gathers each transport's transfers.
type summary struct {
	order []string
	by    map[string][]result
}

func newSummary(ts []llp.Transport) *summary {
	return &summary{order: transportNames(ts), by: make(map[string][]result)}
}

func (s *summary) add(r result) { s.by[r.Transport] = append(s.by[r.Transport], r) }

// row is a transport's medians over its successful transfers.
type row struct {
	Transport string  `json:"transport"`
	Summary   bool    `json:"summary"`
	Runs      int     `json:"runs"`
	Failed    int     `json:"failed"`
	MBs       float64 `json:"mb_s_median"`
	MBsMin    float64 `json:"mb_s_min"`
	MBsMax    float64 `json:"mb_s_max"`
	CPUPerGB  float64 `json:"cpu_s_per_gb_median"`
	LostPct   float64 `json:"lost_pct_median"`
	RatioQUIC float64 `json:"ratio_mb_s_vs_quic_median,omitempty"`
	CPURatio  float64 `json:"ratio_cpu_per_gb_vs_quic_median,omitempty"`
}

func (s *summary) rows() []row {
	var out []row
	for _, name := range s.order {
		rw := row{Transport: name, Summary: true}
		var mbs, cpu, lost, ratio, cratio []float64
		for _, r := range s.by[name] {
			rw.Runs++
			if r.Err != "" {
				rw.Failed++
				continue
			}
			mbs = append(mbs, r.MBs)
			cpu = append(cpu, r.CPUPerGB)
			lost = append(lost, r.LostPct)
			if r.RatioQUIC > 0 {
				ratio = append(ratio, r.RatioQUIC)
				cratio = append(cratio, r.CPURatio)
			}
		}
		if len(mbs) > 0 {
			rw.MBs, rw.CPUPerGB, rw.LostPct = median(mbs), median(cpu), median(lost)
			rw.MBsMin, rw.MBsMax = slices.Min(mbs), slices.Max(mbs)
		}
		if len(ratio) > 0 {
			rw.RatioQUIC, rw.CPURatio = median(ratio), median(cratio)
		}
		out = append(out, rw)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := append([]float64(nil), v...)
	sort.Float64s(w)
	if len(w)%2 == 1 {
		return w[len(w)/2]
	}
	return (w[len(w)/2-1] + w[len(w)/2]) / 2
}

func (s *summary) table(w io.Writer, o *options, msgs int) {
	fmt.Fprintf(w, "medians of %d alternated rounds, %s per transfer%s\n", o.rounds, amount(o, msgs), o.pathString())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "transport\tMB/s\t(min – max)\tCPU s/GB\tlost %%\t× quic MB/s\t× quic CPU/GB\truns (failed)\t\n")
	for _, r := range s.rows() {
		ratio, cratio := "—", "—"
		if r.RatioQUIC > 0 {
			ratio, cratio = fmt.Sprintf("%.2f", r.RatioQUIC), fmt.Sprintf("%.2f", r.CPURatio)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t(%.1f – %.1f)\t%.2f\t%.1f\t%s\t%s\t%d (%d)\t\n",
			r.Transport, r.MBs, r.MBsMin, r.MBsMax, r.CPUPerGB, r.LostPct, ratio, cratio, r.Runs, r.Failed)
	}
	tw.Flush()
}
