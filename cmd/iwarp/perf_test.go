package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
)

// startPerf runs "iwarp perf --listen" and returns its URL and, for
// sctp://, its fingerprint.
func startPerf(t *testing.T, url string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(iwarpBin, append([]string{"perf", "--listen", url}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("perf server exited with %v: %s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("perf server did not stop on SIGINT")
		}
	})
	var u, fp string
	timeout := time.After(10 * time.Second)
	for u == "" || (strings.HasPrefix(url, "sctp") && !strings.Contains(strings.Join(args, " "), "--psk") && fp == "") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("perf server ended: %s", stderr.String())
			}
			if s, ok := strings.CutPrefix(l, "listening on "); ok {
				u = s
			}
			if s, ok := strings.CutPrefix(l, "fingerprint sha-256 "); ok {
				fp = s
			}
		case <-timeout:
			t.Fatal("perf server printed no address")
		}
	}
	return u, fp
}

func perfJSON(t *testing.T, args ...string) perf.Result {
	t.Helper()
	stdout, stderr, code := runIwarp(t, append([]string{"perf", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("perf %v: exit %d: %s", args, code, stderr)
	}
	var r perf.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("perf %v: not one JSON object: %q", args, stdout)
	}
	return r
}

func TestPerfTCP(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0")
	for _, op := range []string{"write", "read", "send"} {
		r := perfJSON(t, "--connect", url, "--op", op, "--size", "4096", "--iters", "200")
		if r.Op != op || r.Test != "bw" || len(r.Results) != 1 {
			t.Fatalf("%s: %+v", op, r)
		}
		st := r.Results[0]
		if st.Bytes != 4096 || st.Iterations != 200 || st.BWAvg <= 0 || st.BWPeak < st.BWAvg || st.MsgRate <= 0 || st.Lat != nil {
			t.Errorf("%s bw: %+v", op, st)
		}
		r = perfJSON(t, "--connect", url, "--op", op, "--lat", "--iters", "50")
		st = r.Results[0]
		if r.Test != "lat" || st.Bytes != 2 || st.Iterations != 50 || st.Lat == nil || st.Lat.Min <= 0 || st.Lat.Min > st.Lat.Typical || st.Lat.Typical > st.Lat.Max || st.Lat.P99 > st.Lat.Max {
			t.Errorf("%s lat: %+v %+v", op, st, st.Lat)
		}
	}
	// Text output: perftest's columns.
	stdout, stderr, code := runIwarp(t, "perf", "--connect", url, "--op", "write", "--size", "1024", "--iters", "100")
	if code != 0 || !strings.Contains(stdout, "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]") || !strings.Contains(stdout, " 1024 ") {
		t.Errorf("text output (exit %d, %s):\n%s", code, stderr, stdout)
	}
	if strings.Contains(stdout, "\r") {
		t.Error("progress shown although stdout is not a terminal")
	}
	stdout, _, code = runIwarp(t, "perf", "--connect", url, "--op", "send", "--lat", "--iters", "20")
	if code != 0 || !strings.Contains(stdout, "t_typical[usec]") || !strings.Contains(stdout, "99.9% percentile[usec]") {
		t.Errorf("latency text output:\n%s", stdout)
	}
}

// TestPerfCQMod: with a completion asked for only every --cq-mod
// operations, runs whose length is no multiple of it (and --duration
// runs, which learn their end only after posting) still count every
// operation and end.
func TestPerfCQMod(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0")
	for _, op := range []string{"write", "read", "send"} {
		r := perfJSON(t, "--connect", url, "--op", op, "--size", "1000", "--iters", "107", "--depth", "10", "--cq-mod", "3")
		if st := r.Results[0]; st.Iterations != 107 || st.BWAvg <= 0 {
			t.Errorf("%s --iters 107 --cq-mod 3: %+v", op, st)
		}
		r = perfJSON(t, "--connect", url, "--op", op, "--size", "1000", "--duration", "200ms", "--cq-mod", "7")
		if st := r.Results[0]; st.Iterations < 7 || st.Seconds < 0.2 || st.BWAvg <= 0 {
			t.Errorf("%s --duration 200ms --cq-mod 7: %+v", op, st)
		}
	}
}

func TestPerfAll(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0")
	r := perfJSON(t, "--connect", url, "--op", "send", "--all", "--iters", "5")
	if len(r.Results) != 20 || r.Results[0].Bytes != 2 || r.Results[19].Bytes != 1<<20 {
		t.Errorf("--all send: %d sizes", len(r.Results))
	}
}

func TestPerfCompareRawTCP(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0")
	for _, op := range []string{"write", "read"} {
		r := perfJSON(t, "--connect", url, "--op", op, "--size", "65536", "--iters", "100", "--compare-raw")
		st := r.Results[0]
		if st.Raw == nil || st.Ratio == nil || st.Raw.Bytes != 65536*100 || !st.Raw.CRC32c || st.Raw.BWAvg <= 0 || *st.Ratio <= 0 {
			t.Fatalf("%s: %+v %+v", op, st, st.Raw)
		}
		t.Logf("%s: iWARP %.0f MB/s, raw TCP with CRC32c %.0f MB/s, ratio %.2f", op, st.BWAvg, st.Raw.BWAvg, *st.Ratio)
	}
	// Latency: round trips on both, the ratio of the typical latencies.
	for _, op := range []string{"send", "read", "write"} {
		r := perfJSON(t, "--connect", url, "--op", op, "--lat", "--size", "64", "--iters", "200", "--compare-raw")
		st := r.Results[0]
		if r.Test != "lat" || st.Lat == nil || st.Raw == nil || st.Raw.Lat == nil || st.Ratio == nil ||
			st.Raw.Iterations != 200 || st.Raw.Bytes != 64*200 || !st.Raw.CRC32c || st.Raw.Rounds != 5 ||
			st.Raw.Lat.Min <= 0 || st.Raw.Lat.Min > st.Raw.Lat.Typical || *st.Ratio <= 0 {
			t.Fatalf("%s --lat: %+v %+v", op, st, st.Raw)
		}
		if want := st.Lat.Typical / st.Raw.Lat.Typical; *st.Ratio < want/3 || *st.Ratio > want*3 {
			t.Errorf("%s --lat: ratio %.2f, typical latencies %.1f and %.1f µs", op, *st.Ratio, st.Lat.Typical, st.Raw.Lat.Typical)
		}
		t.Logf("%s: iWARP %.1f µs, raw TCP with CRC32c %.1f µs, ratio %.2f", op, st.Lat.Typical, st.Raw.Lat.Typical, *st.Ratio)
	}
	// The text output has the raw columns.
	stdout, _, code := runIwarp(t, "perf", "--connect", url, "--op", "send", "--lat", "--iters", "50", "--compare-raw")
	if code != 0 || !strings.Contains(stdout, "raw t_typical[usec]   ratio") {
		t.Errorf("text --lat --compare-raw: exit %d\n%s", code, stdout)
	}
}

// TestPerfAtomic: --op atomic, bandwidth and latency, with the raw
// request/response comparison; perftest's 8-octet size.
func TestPerfAtomic(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0")
	for _, typ := range []string{"FETCH_AND_ADD", "CMP_AND_SWAP"} {
		r := perfJSON(t, "--connect", url, "--op", "atomic", "--atomic-type", typ, "--iters", "300", "--compare-raw")
		st := r.Results[0]
		if r.Op != "atomic" || st.Bytes != 8 || st.Iterations != 300 || st.MsgRate <= 0 || st.Raw == nil || st.Ratio == nil || !st.Raw.CRC32c {
			t.Errorf("%s bw: %+v %+v", typ, st, st.Raw)
		}
	}
	r := perfJSON(t, "--connect", url, "--op", "atomic", "--lat", "--iters", "100", "--compare-raw")
	if st := r.Results[0]; st.Lat == nil || st.Raw == nil || st.Raw.Lat == nil || *st.Ratio <= 0 {
		t.Errorf("atomic lat: %+v", st)
	}
	stdout, _, code := runIwarp(t, "perf", "--connect", url, "--op", "atomic", "--iters", "50")
	if code != 0 || !strings.Contains(stdout, "Atomic BW Test") || !strings.Contains(stdout, "\n 8 ") {
		t.Errorf("text output (exit %d):\n%s", code, stdout)
	}
}

// TestPerfRefusal: a test beyond the server's budget is refused, and the
// client says why in one line.
func TestPerfRefusal(t *testing.T) {
	url, _ := startPerf(t, "tcp://127.0.0.1:0", "--conn-budget", "1M", "--mem-budget", "8M")
	_, stderr, code := runIwarp(t, "perf", "--connect", url, "--op", "write", "--size", "4194304", "--iters", "10")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "the server refused: the test needs 4.0 MiB of memory there, more than its per-connection budget of 1.0 MiB") {
		t.Errorf("exit %d, %q", code, stderr)
	}
	// A test within the budget runs.
	perfJSON(t, "--connect", url, "--op", "write", "--size", "65536", "--iters", "10")
}

func TestPerfSCTP(t *testing.T) {
	url, fp := startPerf(t, "sctp://127.0.0.1:0")
	r := perfJSON(t, "--connect", url, "--fingerprint", fp, "--op", "write", "--size", "65536", "--iters", "50", "--compare-raw")
	st := r.Results[0]
	if r.Transport != "sctp" || st.Iterations != 50 || st.Raw == nil || st.Ratio == nil || st.Raw.Transport != "sctp" {
		t.Fatalf("%+v", r)
	}
	t.Logf("write: DDP/SCTP %.0f MB/s, raw SCTP %.0f MB/s, ratio %.2f", st.BWAvg, st.Raw.BWAvg, *st.Ratio)
	r = perfJSON(t, "--connect", url, "--fingerprint", fp, "--op", "read", "--lat", "--iters", "20", "--compare-raw")
	if st := r.Results[0]; st.Lat == nil || st.Raw == nil || st.Raw.Lat == nil || st.Raw.Iterations != 20 || st.Ratio == nil || *st.Ratio <= 0 {
		t.Fatalf("%+v", r)
	}
	// A wrong fingerprint fails in one line.
	bad := "00" + fp[2:]
	_, stderr, code := runIwarp(t, "perf", "--connect", url, "--fingerprint", bad, "--op", "write", "--iters", "1")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("wrong fingerprint: exit %d, %q", code, stderr)
	}
}

func TestPerfPSKAndPcap(t *testing.T) {
	url, _ := startPerf(t, "sctp://127.0.0.1:0", "--psk", "k")
	file := filepath.Join(t.TempDir(), "perf.pcap")
	perfJSON(t, "--connect", url, "--psk", "k", "--op", "send", "--size", "3000", "--iters", "10", "--pcap", file)
	recs := dumpJSON(t, file)
	sends := 0
	for _, r := range recs {
		if r["op"] == "Send" && r["payload_len"] == float64(3000) {
			sends++
		}
	}
	if sends != 10 {
		t.Errorf("%d Sends of 3000 bytes in the client's capture, want 10", sends)
	}
}

func TestPerfUsage(t *testing.T) {
	for _, args := range [][]string{
		{"perf"},
		{"perf", "--connect", "tcp://127.0.0.1:1"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "fetch"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "atomic", "--size", "64"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--atomic-type", "CMP_AND_SWAP"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "atomic", "--atomic-type", "SWAP"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--mem-budget", "1G"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--mem-budget", "lots"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--mem-budget", "32M"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--max-conns", "0"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--size", "8", "--all"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--iters", "8", "--duration", "1s"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--depth", "0"},
		{"perf", "--connect", "tcp://127.0.0.1:1", "--op", "write", "--cq-mod", "0"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--op", "write"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--cq-mod", "4"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--connect", "tcp://127.0.0.1:1"},
		{"perf", "--listen", "tcp://127.0.0.1:0", "--atomic-type", "CMP_AND_SWAP"},
	} {
		_, stderr, code := runIwarp(t, args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	_, stderr, code := runIwarp(t, "perf", "-h")
	if code != 0 || !strings.Contains(stderr, "Examples:") || !strings.Contains(stderr, `"ratio"`) {
		t.Errorf("perf -h: exit %d", code)
	}
	// Nobody listening: a failure, exit 1, one line.
	_, stderr, code = runIwarp(t, "perf", "--connect", "tcp://127.0.0.1:1", "--op", "write")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("refused: exit %d, %q", code, stderr)
	}
}
