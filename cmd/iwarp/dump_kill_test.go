package main

import (
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/endpoint"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// A --pcap capture is written as packets come: while serve runs, iwarp
// dump reads the session so far from it, and after serve is killed
// (SIGKILL, so that nothing is flushed or closed on the way out) the file
// is whole up to its last packet: iwarp dump and tshark read it without
// an error.
func TestPcapKilled(t *testing.T) {
	for _, scheme := range []string{"tcp", "sctp"} {
		t.Run(scheme, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "serve.pcap")
			s := startServe(t, "--listen", scheme+"://127.0.0.1:0", "--mr-size", "16384", "--pcap", file)
			exerciseOpen(t, s, endpoint.Flags{})

			// The session so far, while serve runs and the connection
			// is open.
			complete := func(recs []map[string]any) bool {
				ops := map[string]int{}
				for _, r := range recs {
					if op, ok := r["op"].(string); ok {
						ops[op]++
					}
				}
				return exercised(ops)
			}
			var live []map[string]any
			var liveErr error
			if !waitfor.Every(5*time.Second, 20*time.Millisecond, func() bool {
				live, liveErr = dumpJSONTry(t, file)
				return liveErr == nil && complete(live)
			}) {
				t.Fatalf("the capture of a running serve does not hold the session: %v %v", liveErr, live)
			}

			s.cmd.Process.Kill()
			<-s.done
			s.cmd.Wait()

			// Whole records up to the end of the file.
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := pcapfile.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ; ; n++ {
				if _, err = r.Next(); err != nil {
					break
				}
			}
			if err != io.EOF {
				t.Fatalf("the killed serve's capture, after %d packets: %v", n, err)
			}
			recs := dumpJSON(t, file)
			for _, r := range recs {
				if r["kind"] == "error" {
					t.Errorf("dump: %v", r["note"])
				}
			}
			if !complete(recs) {
				t.Errorf("the killed serve's capture: %v", recs)
			}

			tshark := tsharkPath(t)
			args := append([]string{"-r", file, "-V"}, tsharkArgs...)
			out, err := exec.Command(tshark, args...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "cut short") || strings.Contains(string(out), "Malformed") {
				t.Fatalf("tshark -r on the killed serve's capture: %v\n%.3000s", err, out)
			}
			want := "Read Request"
			if scheme == "sctp" {
				want = "Payload protocol identifier: DDP Segment Chunk (16)"
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("tshark does not show %q:\n%.3000s", want, out)
			}
		})
	}
}
