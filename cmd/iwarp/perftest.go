package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perftest"
	"github.com/iwarpgo/iwarp/mpa"
)

type perftestOptions struct {
	listen, connect string
	test            string
	op              string
	lat             bool
	cfg             perftest.Config
	memory          string
	once            bool
	json            bool
	noCRC, markers  bool
	pcap            string
	firstDelay      time.Duration
}

// perftestRequested reports whether perf's arguments ask for --perftest.
func perftestRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		switch strings.TrimLeft(a, "-") {
		case "perftest", "perftest=true", "perftest=1":
			return strings.HasPrefix(a, "-")
		}
	}
	return false
}

func runPerftest(args []string, stdout, stderr io.Writer) error {
	var o perftestOptions
	fs := flag.NewFlagSet("perf --perftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, perftestUsage)
		fs.PrintDefaults()
	}
	fs.Bool("perftest", true, "speak perftest's rdma_cm protocol")
	fs.StringVar(&o.listen, "listen", "", "serve: the `URL` to listen on (tcp://[HOST][:PORT], port 18515 by default)")
	fs.StringVar(&o.connect, "connect", "", "measure: the `URL` of a perftest server (tcp://HOST[:PORT])")
	fs.StringVar(&o.test, "test", "", "the test: write_bw, read_bw, send_bw, write_lat, read_lat or send_lat")
	fs.StringVar(&o.op, "op", "", "the operation (write, read, send), instead of --test; with --lat for latency")
	fs.BoolVar(&o.lat, "lat", false, "with --op: the latency test")
	intVar := func(p *int, names []string, usage string) {
		for _, n := range names {
			fs.IntVar(p, n, 0, usage)
		}
	}
	intVar(&o.cfg.Size, []string{"size", "s"}, "message size in octets (perftest -s; default 65536, 2 for latency)")
	intVar(&o.cfg.Iters, []string{"iters", "n"}, "iterations (perftest -n; default 5000 for write_bw, else 1000)")
	intVar(&o.cfg.TxDepth, []string{"tx-depth", "t", "depth"}, "operations outstanding (perftest -t; default 128, 1 for latency)")
	intVar(&o.cfg.RxDepth, []string{"rx-depth", "r"}, "receive depth of the Send tests (perftest -r; default 512); the same at both ends")
	intVar(&o.cfg.CQMod, []string{"cq-mod", "Q"}, "a completion every `N` operations (perftest -Q; default 100, 1 above 8 KiB)")
	intVar(&o.cfg.OutReads, []string{"out-reads", "o"}, "outstanding RDMA Reads of the read tests (perftest -o; default 128)")
	fs.StringVar(&o.memory, "memory", "256M", "server: the most memory one session may register (octets, or with K, M, G)")
	fs.BoolVar(&o.once, "once", false, "server: serve one session and exit, as perftest's server does")
	fs.BoolVar(&o.json, "json", false, "print each session's result as one JSON object")
	fs.BoolVar(&o.noCRC, "no-crc", false, "ask for no MPA CRC32c (used only if both ends ask; siw's peers do)")
	fs.BoolVar(&o.markers, "markers", false, "ask the peer for MPA Markers")
	fs.StringVar(&o.pcap, "pcap", "", "record the sessions' connections as a pcap capture in `FILE`")
	fs.DurationVar(&o.firstDelay, "first-fpdu-delay", perftest.DefaultFirstFPDUDelay, "client: pause after each MPA Reply before the first FPDU (Linux siw's accept race; 0: none)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if (o.listen == "") == (o.connect == "") {
		return usagef("give one of --listen URL (server) or --connect URL (client)")
	}
	test, err := o.parseTest()
	if err != nil {
		return err
	}
	o.cfg.Test = test
	if o.cfg.MemoryBudget, err = parseSize(o.memory); err != nil {
		return usagef("--memory: %v", err)
	}
	o.cfg.MPA = &mpa.Config{NoCRC: o.noCRC, Markers: o.markers}
	o.cfg.FirstFPDUDelay = o.firstDelay
	if o.firstDelay == 0 {
		o.cfg.FirstFPDUDelay = -1
	}
	if err := o.cfg.Check(); err != nil {
		return usagef("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.listen != "" {
		if test == perftest.WriteLat {
			return usagef("%v", perftest.ErrWriteLatServer)
		}
		if flagGiven(fs, "first-fpdu-delay") {
			return usagef("--first-fpdu-delay is for the client")
		}
		addr, err := perftestAddr(o.listen, true)
		if err != nil {
			return err
		}
		return perftestServe(ctx, addr, &o, stdout, stderr)
	}
	if flagGiven(fs, "once") || flagGiven(fs, "memory") {
		return usagef("--once and --memory are for the server")
	}
	addr, err := perftestAddr(o.connect, false)
	if err != nil {
		return err
	}
	return perftestConnect(ctx, addr, &o, stdout, stderr)
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

// parseTest takes --test, or --op with --lat.
func (o *perftestOptions) parseTest() (perftest.Test, error) {
	switch {
	case o.test != "" && o.op != "":
		return 0, usagef("give --test or --op, not both")
	case o.test != "":
		if o.lat {
			return 0, usagef("--lat goes with --op; --test names the latency tests (write_lat, ...)")
		}
		t, err := perftest.ParseTest(o.test)
		if err != nil {
			return 0, usagef("%v", err)
		}
		return t, nil
	case o.op != "":
		kind := "_bw"
		if o.lat {
			kind = "_lat"
		}
		switch o.op {
		case "write", "read", "send":
			return perftest.ParseTest(o.op + kind)
		}
		return 0, usagef("--op %q: want write, read or send", o.op)
	}
	return 0, usagef("--test is required (write_bw, read_bw, send_bw, write_lat, read_lat or send_lat)")
}

// perftestAddr parses tcp://[HOST][:PORT] with perftest's port as the
// default.
func perftestAddr(s string, listening bool) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "tcp" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Opaque != "" {
		return "", usagef("bad endpoint %q: perftest's protocol runs over MPA/TCP: tcp://HOST[:PORT]", s)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = strconv.Itoa(perftest.DefaultPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", usagef("bad endpoint %q: bad port", s)
	}
	if host == "" && !listening {
		return "", usagef("bad endpoint %q: missing host", s)
	}
	return net.JoinHostPort(host, port), nil
}

// parseSize parses octets with an optional K, M or G (powers of 2^10).
func parseSize(s string) (int64, error) {
	m := int64(1)
	t := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	switch {
	case strings.HasSuffix(t, "K"):
		m, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		m, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		m, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/m {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * m, nil
}

// perftestConnect runs one session as perftest's client.
func perftestConnect(ctx context.Context, addr string, o *perftestOptions, stdout, stderr io.Writer) error {
	cfg := o.cfg
	var rec *endpoint.Recorder
	if o.pcap != "" {
		var err error
		if rec, err = endpoint.NewRecorder(o.pcap, "tcp"); err != nil {
			return err
		}
		m := mpa.Config{}
		if cfg.MPA != nil {
			m = *cfg.MPA
		}
		m.Trace = rec.MPATrace(false)
		cfg.MPA = &m
	}
	res, err := perftest.Dial(ctx, addr, cfg)
	if cerr := rec.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return res.Report(stdout, "tcp://"+addr, o.json)
}

// perftestServe serves sessions until ctx ends (one with --once).
func perftestServe(ctx context.Context, addr string, o *perftestOptions, stdout, stderr io.Writer) error {
	cfg := &mpa.Config{NoCRC: o.noCRC, Markers: o.markers}
	var rec *endpoint.Recorder
	if o.pcap != "" {
		var err error
		if rec, err = endpoint.NewRecorder(o.pcap, "tcp"); err != nil {
			return err
		}
		cfg.Trace = rec.MPATrace(true)
	}
	l, err := mpa.Listen(ctx, "tcp", addr, cfg)
	if err != nil {
		rec.Close()
		return err
	}
	shown := l.Addr()
	defer func() {
		l.Close()
		rec.Close()
	}()
	if !o.json {
		fmt.Fprintf(stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		fmt.Fprintf(stdout, " %s server (perftest -R protocol) on tcp://%s\n", o.cfg.Test, shown)
	}
	for {
		res, err := perftest.Serve(ctx, l, o.cfg)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if res == nil {
				return err
			}
			fmt.Fprintf(stderr, "iwarp: session with %s: %v\n", res.ControlPeer, err)
		} else if err := res.Report(stdout, "tcp://"+shown.String(), o.json); err != nil {
			return err
		}
		if o.once {
			return err
		}
	}
}
