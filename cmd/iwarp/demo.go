package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/web"
)

func init() {
	register("demo", command{
		summary: "serve the browser demo of direct data placement",
		run:     runDemo,
	})
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to serve the demo on")
	hosts := fs.String("host", "", "further `names` (comma-separated) the page may be reached under, besides the address")
	impair := fs.String("impair", "clean", "the network a new Go peer starts with: "+presetNames())
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: iwarp demo [--addr host:port] [--impair preset] [--host name]")
		fmt.Fprintln(stderr, "Serves a page that shows RDMA Writes, Reads and Sends being placed,")
		fmt.Fprintln(stderr, "between the browser and a Go peer, or between two browser tabs.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	im, ok := demo.Preset(*impair)
	if !ok {
		return usagef("--impair %q: one of %s", *impair, presetNames())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	assets, err := web.Load(ctx, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	cfg := demo.Config{Assets: assets, Log: stderr, Addr: ln.Addr(), Impairment: im}
	if *hosts != "" {
		cfg.Hosts = strings.Split(*hosts, ",")
	}
	fmt.Fprintf(stdout, "iwarp demo: open http://%s/ in a browser (Ctrl-C stops)\n", browsable(ln.Addr()))
	fmt.Fprintf(stdout, "iwarp demo: the Go peer's network starts as: %s (loss %g %%, delay %d ms, jitter %d ms, duplicates %g %%)\n",
		im.Preset, im.Loss, im.Delay, im.Jitter, im.Dup)
	return demo.New(cfg).Serve(ctx, ln)
}

// browsable names a listener's address as a browser can open it: an
// unspecified host (":8080") as localhost.
func browsable(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", strconv.Itoa(ta.Port))
	}
	return a.String()
}

func presetNames() string {
	var names []string
	for _, p := range demo.Presets {
		names = append(names, fmt.Sprintf("%q", p.Preset))
	}
	return strings.Join(names, ", ")
}
