package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/capture/replay"
)

func TestReplayRefuses(t *testing.T) {
	dir := t.TempDir()
	random := filepath.Join(dir, "random.pcap")
	if err := os.WriteFile(random, []byte("random bytes, not a capture at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay"}, 2, "want a capture FILE"},
		{[]string{"replay", "a", "b", "c"}, 2, "want a capture FILE"},
		{[]string{"replay", filepath.Join(dir, "missing.pcap")}, 1, "no such file"},
		{[]string{"replay", random}, 1, "not a valid pcap or pcapng file"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// serveReplay runs the command with args until the test ends and returns
// the URL it printed and the summary line before it.
func serveReplay(t *testing.T, args ...string) (page, summary string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- replayMain(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), pw, &errb)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replay: %v\n%s", err, errb.String())
		}
	})
	sc := bufio.NewScanner(pr)
	url := regexp.MustCompile(`open (http://\S+) in a browser`)
	for page == "" && sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, " records, ") {
			summary = line
		}
		if m := url.FindStringSubmatch(line); m != nil {
			page = m[1]
		}
	}
	go io.Copy(io.Discard, pr)
	if page == "" {
		t.Fatalf("no URL; stderr: %s", errb.String())
	}
	return page, summary
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	return b
}

// TestReplayServes runs the command on the siw capture: it prints the
// page's URL, and the page, the script of its Replay mode and the
// capture are served there.
func TestReplayServes(t *testing.T) {
	page, summary := serveReplay(t, "testdata/siw-terminate.pcap")
	if !strings.Contains(summary, "12 records, 10 segments, 1 connections") {
		t.Errorf("summary: %q", summary)
	}
	if !strings.Contains(page, "?capture=replay%2Fsiw-terminate.pcap") {
		t.Fatalf("URL %q", page)
	}
	base := page[:strings.Index(page, "?")]
	if !bytes.Contains(httpGet(t, base), []byte(`<script src="replay.js">`)) {
		t.Error("the page has no replay.js")
	}
	want, err := os.ReadFile("testdata/siw-terminate.pcap")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(httpGet(t, base+"replay/siw-terminate.pcap"), want) {
		t.Error("the capture served differs from the file")
	}
}

// TestReplayDecrypts gives the command a DDP/SCTP/DTLS capture and its
// key log: it serves the SCTP packets in the clear, which the page's
// decoder reads with no key.
func TestReplayDecrypts(t *testing.T) {
	capture, keylog := "../../capture/replay/testdata/dtls-cert.pcapng", "../../capture/replay/testdata/dtls-cert.keylog"
	var out, errb bytes.Buffer
	if code := run([]string{"replay", capture}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "give the key log that --keylog wrote") {
		t.Errorf("without the key log: status %d, %q", code, errb.String())
	}
	page, summary := serveReplay(t, capture, keylog)
	if !strings.Contains(summary, "12 records, 8 segments, 1 connections") {
		t.Errorf("summary: %q", summary)
	}
	served := httpGet(t, page[:strings.Index(page, "?")]+"replay/dtls-cert.pcapng")
	m, warn, err := replay.Decode(served)
	if err != nil || warn != "" || m.Segments != 8 {
		t.Errorf("the capture served: %v %q", err, warn)
	}
}
