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

// TestReplayServes runs the command on the siw capture: it prints the
// page's URL, and the page, the script of its Replay mode and the
// capture are served there.
func TestReplayServes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- replayMain(ctx, []string{"--addr", "127.0.0.1:0", "testdata/siw-terminate.pcap"}, pw, &errb)
		pw.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replay: %v\n%s", err, errb.String())
		}
	}()
	sc := bufio.NewScanner(pr)
	var page string
	url := regexp.MustCompile(`open (http://\S+) in a browser`)
	for page == "" && sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "records") && !strings.Contains(line, "12 records, 10 segments, 1 connections") {
			t.Errorf("summary: %q", line)
		}
		if m := url.FindStringSubmatch(line); m != nil {
			page = m[1]
		}
	}
	go io.Copy(io.Discard, pr)
	if !strings.Contains(page, "?capture=replay%2Fsiw-terminate.pcap") {
		t.Fatalf("URL %q", page)
	}
	base := page[:strings.Index(page, "?")]
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) []byte {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return b
	}
	if !bytes.Contains(get(""), []byte(`<script src="replay.js">`)) {
		t.Error("the page has no replay.js")
	}
	want, err := os.ReadFile("testdata/siw-terminate.pcap")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(get("replay/siw-terminate.pcap"), want) {
		t.Error("the capture served differs from the file")
	}
}
