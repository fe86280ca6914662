// Command readmodel runs package readmodel between two processes (from
// the bench module):
//
//	go run ./cmd/readmodel -listen 127.0.0.1:6000 &
//	go run ./cmd/readmodel -connect 127.0.0.1:6000 [-fpdus] [-iters 6000] [-rounds 7] [-window 128] [-stream=false]
//
// Each round moves iters answers as a plain stream, then as Reads, on
// fresh connections, and prints both rates (MB/s, 2^20 octets) and the
// Read's ratio to the stream; the last line is the median ratio. With
// -stream=false it moves the Reads alone and prints their rate.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/iwarpgo/iwarp/bench/readmodel"
)

func main() {
	listen := flag.String("listen", "", "serve at this address")
	connect := flag.String("connect", "", "measure against the server at this address")
	fpdus := flag.Bool("fpdus", false, "answers as MPA's two FPDUs of a 64 KiB Read Response")
	iters := flag.Int("iters", 6000, "answers per round and mode")
	rounds := flag.Int("rounds", 7, "rounds")
	window := flag.Int("window", 128, "Reads outstanding")
	stream := flag.Bool("stream", true, "also move each round's answers as a plain stream, for the ratio")
	flag.Parse()
	if err := run(*listen, *connect, *fpdus, *stream, *iters, *rounds, *window); err != nil {
		fmt.Fprintln(os.Stderr, "readmodel:", err)
		os.Exit(1)
	}
}

func run(listen, connect string, fpdus, stream bool, iters, rounds, window int) error {
	if listen != "" {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		return readmodel.Serve(ln)
	}
	if connect == "" || iters < 1 || rounds < 1 || window < 1 {
		return fmt.Errorf("-listen ADDR, or -connect ADDR with positive -iters, -rounds and -window")
	}
	rate := func(f func() error) (float64, error) {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		return float64(readmodel.Size) * float64(iters) / time.Since(t0).Seconds() / (1 << 20), nil
	}
	var ratios []float64
	for range rounds {
		if !stream {
			r, err := rate(func() error { return readmodel.Read(connect, fpdus, iters, window) })
			if err != nil {
				return err
			}
			fmt.Printf("read %6.0f MB/s\n", r)
			continue
		}
		s, err := rate(func() error { return readmodel.Stream(connect, fpdus, iters) })
		if err != nil {
			return err
		}
		r, err := rate(func() error { return readmodel.Read(connect, fpdus, iters, window) })
		if err != nil {
			return err
		}
		ratios = append(ratios, r/s)
		fmt.Printf("stream %6.0f MB/s  read %6.0f MB/s  ratio %.3f\n", s, r, r/s)
	}
	if !stream {
		return nil
	}
	slices.Sort(ratios)
	fmt.Printf("median ratio %.3f over %d rounds\n", ratios[len(ratios)/2], rounds)
	return nil
}
