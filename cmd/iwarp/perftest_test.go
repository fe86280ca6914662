package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perftest"
	"github.com/iwarpgo/iwarp/internal/waitfor"
)

func TestPerftestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--perftest"}, "give one of --listen"},
		{[]string{"--perftest", "--listen", "tcp://:1", "--connect", "tcp://h"}, "give one of --listen"},
		{[]string{"--perftest", "--connect", "tcp://h"}, "--test is required"},
		{[]string{"--perftest", "--connect", "tcp://h", "--test", "atomic_bw"}, "unknown perftest test"},
		{[]string{"--perftest", "--connect", "tcp://h", "--test", "write_bw", "--op", "read"}, "not both"},
		{[]string{"--perftest", "--connect", "tcp://h", "--op", "fetch"}, "want write, read or send"},
		{[]string{"--perftest", "--connect", "sctp://h:1", "--test", "write_bw"}, "MPA/TCP"},
		{[]string{"--perftest", "--connect", "tcp://:18515", "--test", "write_bw"}, "missing host"},
		{[]string{"--perftest", "--connect", "tcp://h:99999", "--test", "write_bw"}, "bad port"},
		{[]string{"--perftest", "--connect", "tcp://h", "--test", "write_bw", "--once"}, "for the server"},
		{[]string{"--perftest", "--listen", "tcp://", "--test", "write_lat"}, "rule 4"},
		{[]string{"--perftest", "--listen", "tcp://", "--test", "send_bw", "-s", "1048576"}, "budget"},
		{[]string{"--perftest", "--listen", "tcp://", "--test", "write_bw", "--memory", "lots"}, "--memory"},
		{[]string{"--perftest", "--listen", "tcp://", "--test", "write_bw", "--first-fpdu-delay", "1s"}, "for the client"},
		{[]string{"--perftest", "--connect", "tcp://h", "--test", "write_bw", "-n", "3"}, "iterations"},
		{[]string{"--perftest", "--connect", "tcp://h", "--test", "write_bw", "extra"}, "unexpected argument"},
	} {
		var out, errw bytes.Buffer
		err := runPerf(c.args, &out, &errw)
		var ue endpoint.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
	var out, errw bytes.Buffer
	if err := runPerf([]string{"--perftest", "-h"}, &out, &errw); !errors.Is(err, errHelp()) || !strings.Contains(errw.String(), "pingpong_dest") || !strings.Contains(errw.String(), "-rx-depth") {
		t.Errorf("--perftest -h: %v\n%s", err, errw.String())
	}
	errw.Reset()
	if runPerf([]string{"-h"}, &out, &errw); !strings.Contains(errw.String(), "-perftest") {
		t.Errorf("perf -h does not mention --perftest:\n%s", errw.String())
	}
}

func errHelp() error { return flag.ErrHelp }

func TestPerftestParsing(t *testing.T) {
	for in, want := range map[string]string{"tcp://": ":18515", "tcp://:7000": ":7000", "tcp://10.0.0.1": "10.0.0.1:18515",
		"tcp://[::1]": "[::1]:18515", "tcp://host:1/": "host:1"} {
		if got, err := perftestAddr(in, true); err != nil || got != want {
			t.Errorf("perftestAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]int64{"256M": 256 << 20, "1g": 1 << 30, "4096": 4096, "64KB": 64 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1M", "1T", "M", "99999999999G"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	for args, want := range map[string]bool{"--perftest": true, "-perftest": true, "--perftest=true": true, "perftest": false,
		"--listen tcp:// --perftest": true, "-- --perftest": false, "--perftest=false": false} {
		if got := perftestRequested(strings.Fields(args)); got != want {
			t.Errorf("perftestRequested(%q) = %v", args, got)
		}
	}
}

// freePort returns a loopback port nothing listens on (for a moment).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPerftestCommand runs the server (--once) and the client in process
// for each test the server offers, in perftest's format and as JSON, with
// the client's connections and the server's recorded with --pcap, and
// checks the figures both print and, with tshark, the captures.
func TestPerftestCommand(t *testing.T) {
	for _, test := range []string{"write_bw", "read_bw", "send_bw", "send_lat", "read_lat"} {
		t.Run(test, func(t *testing.T) {
			dir := t.TempDir()
			addr := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
			common := []string{"--perftest", "--test", test, "-n", "40", "-s", "3000"}
			var sout, serr bytes.Buffer
			var wg sync.WaitGroup
			var srvErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				srvErr = runPerf(append([]string{"--listen", addr, "--once", "--json", "--pcap", filepath.Join(dir, "server.pcap")}, common...), &sout, &serr)
			}()
			var cout, cerr bytes.Buffer
			var err error
			// Connect once the server listens: until then the
			// connection is refused.
			waitfor.Every(5*time.Second, 20*time.Millisecond, func() bool {
				cout.Reset()
				cerr.Reset()
				err = runPerf(append([]string{"--connect", addr, "--first-fpdu-delay", "0", "--pcap", filepath.Join(dir, "client.pcap")}, common...), &cout, &cerr)
				return err == nil || !strings.Contains(err.Error(), "refused")
			})
			wg.Wait()
			if err != nil || srvErr != nil {
				t.Fatalf("client: %v %s\nserver: %v %s", err, cerr.String(), srvErr, serr.String())
			}
			out := cout.String()
			if !strings.Contains(out, mustTest(t, test).Title()) || !strings.Contains(out, "MPA CRC        : ON") {
				t.Errorf("client's output:\n%s", out)
			}
			// The result line: #bytes #iterations then the figures.
			var fields []string
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= 5 && f[0] == "3000" && f[1] == "40" {
					fields = f
				}
			}
			if fields == nil {
				t.Fatalf("no result line in:\n%s", out)
			}
			var j perftest.ReportJSON
			if err := json.Unmarshal(sout.Bytes(), &j); err != nil {
				t.Fatalf("server's JSON %q: %v", sout.String(), err)
			}
			if j.Test != "ib_"+test || j.Role != "server" || j.PeerVersion != perftest.Version || !j.CRC {
				t.Errorf("server's JSON %+v", j)
			}
			switch test {
			case "write_bw", "read_bw":
				// The server has the client's report: the same figures.
				if j.Result == nil || j.ReportFrom != "peer" || strconv.FormatFloat(j.Result.BWAvg, 'f', 2, 64) != fields[3] {
					t.Errorf("server's report %+v, client printed %v", j.Result, fields)
				}
			case "send_bw":
				if j.Result == nil || j.Moved.SendsReceived != 40 || j.Result.BWPeak != 0 {
					t.Errorf("server's JSON %+v %+v", j.Result, j.Moved)
				}
			case "send_lat":
				if j.Result == nil || j.Result.Lat == nil || j.Moved.SendsReceived != 40 {
					t.Errorf("server's JSON %+v %+v", j.Result, j.Moved)
				}
			case "read_lat":
				if j.Result != nil || j.Moved.ReadsServed != 40 {
					t.Errorf("server's JSON %+v %+v", j.Result, j.Moved)
				}
			}
			if tshark, err := exec.LookPath("tshark"); err == nil {
				for _, f := range []string{"client.pcap", "server.pcap"} {
					o, err := exec.Command(tshark, append([]string{"-r", filepath.Join(dir, f), "-V"}, tsharkArgs...)...).CombinedOutput()
					if err != nil {
						t.Fatalf("tshark %s: %v", f, err)
					}
					s := string(o)
					n, good := strings.Count(s, "ULPDU length:"), strings.Count(s, "(Good CRC32)")
					// 16 control messages each way at most, 40 operations.
					if n < 40 || good != n || strings.Contains(s, "Bad CRC32") {
						t.Errorf("%s: %d FPDUs, %d with a good CRC", f, n, good)
					}
				}
			}
		})
	}
}

func mustTest(t *testing.T, s string) perftest.Test {
	t.Helper()
	x, err := perftest.ParseTest(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
