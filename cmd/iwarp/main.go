// Command iwarp is the project's one command-line tool: a browser demo of
// direct data placement, a responder for labs and tests, a perftest-style
// benchmark, and a decoder for captures of iWARP traffic.
//
//	iwarp demo    serve the browser demo
//	iwarp serve   a responder: registers memory, answers RDMA operations
//	iwarp perf    bandwidth and latency of RDMA Write, Read and Send
//	iwarp dump    decode a pcap or pcapng capture of MPA/TCP or DDP/SCTP
//	iwarp replay  the browser demo with a capture loaded, its segments landing in memory
//	iwarp rping   rdma-core's rping, client or server (interoperates with Linux)
//
// Endpoints are URLs: tcp://host:port (MPA over TCP) or sctp://host:port
// (DDP over SCTP over DTLS over UDP). "iwarp CMD -h" prints a command's
// usage. A usage error exits with status 2, a failure with status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"os"
	"sort"
)

// command is one subcommand. Each lives in its own file and registers
// itself in init.
type command struct {
	summary string
	// run executes the command with its arguments (after the command's
	// name). It returns a usageError for bad usage.
	run func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

// usagef reports an error in how the command was called: exit status 2.
var usagef = endpoint.Usagef

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "iwarp: unknown command %q (try: iwarp -h)\n", args[0])
		return 2
	}
	err := c.run(args[1:], stdout, stderr)
	var ue endpoint.UsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "iwarp %s: %s\n", args[0], ue.Msg)
		return 2
	default:
		fmt.Fprintf(stderr, "iwarp %s: %v\n", args[0], err)
		return 1
	}
}

// parseFlags parses a subcommand's flags. -h prints the command's usage
// (fs.Usage) and returns flag.ErrHelp; a bad flag is a usage error, one
// line, without the usage text the flag package would print.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		return usagef("%v", err)
	}
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: iwarp COMMAND [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-7s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Endpoints are URLs: tcp://host:port (MPA over TCP), sctp://host:port (DDP over SCTP over DTLS).")
	fmt.Fprintln(w, "Run 'iwarp COMMAND -h' for a command's flags and examples.")
}
