package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/iwarpgo/iwarp/capture/replay"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/web"
)

func init() {
	register("replay", command{
		summary: "serve the browser demo with a capture loaded, to watch its segments land in memory",
		run:     runReplay,
	})
}

// maxReplayFile is the largest capture replay serves: the page's limit.
const maxReplayFile = 256 << 20

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func runReplay(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return replayMain(ctx, args, stdout, stderr)
}

// replayMain is the command until ctx ends.
func replayMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to serve the page on (port 0: a free one)")
	fs.Usage = func() {
		fmt.Fprint(stderr, replayUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usagef("want a capture FILE and at most a KEYLOG (try: iwarp replay -h)")
	}
	file := fs.Arg(0)
	b, err := readCapture(file)
	if err != nil {
		return err
	}
	var keylog []byte
	if fs.NArg() == 2 {
		if keylog, err = os.ReadFile(fs.Arg(1)); err != nil {
			return err
		}
	}
	m, warning, err := replay.DecodeKeyLog(b, keylog)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	if len(keylog) > 0 {
		if _, _, err := replay.Decode(b); err == nil {
			fmt.Fprintf(stderr, "iwarp replay: %s holds iWARP in the clear; the key log %s is not needed\n", file, fs.Arg(1))
		} else if clear, _, err := replay.DecryptDTLS(b, keylog); err == nil {
			b = clear // the page gets the SCTP packets in the clear
		}
	}
	if warning != "" {
		fmt.Fprintf(stderr, "iwarp replay: %s: %s\n", file, warning)
	}

	assets, err := web.Load(ctx, stderr)
	if err != nil {
		return err
	}
	name := "replay/" + unsafeName.ReplaceAllString(filepath.Base(file), "_")
	assets[name] = b
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "iwarp replay: %s: %d records, %d segments, %d connections\n", file, len(m.Events), m.Segments, len(m.Conns))
	fmt.Fprintf(stdout, "iwarp replay: open http://%s/?capture=%s in a browser (Ctrl-C stops)\n", browsable(ln.Addr()), url.QueryEscape(name))
	return demo.New(demo.Config{Assets: assets, Log: stderr, Addr: ln.Addr()}).Serve(ctx, ln)
}

// readCapture reads a capture file, refusing one too large to replay.
func readCapture(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxReplayFile {
		return nil, fmt.Errorf("%s is %d MiB; replay takes captures of up to %d MiB: cut it first (editcap -c 100000 %s part.pcap)", file, st.Size()>>20, maxReplayFile>>20, file)
	}
	return io.ReadAll(io.LimitReader(f, maxReplayFile+1))
}
