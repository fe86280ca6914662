package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkReplayInstalled runs "iwarp replay", as "go install" put it in
// bin, from the directory dir that holds nothing but a capture, with no
// go command on PATH: it must serve the page, the capture it was given,
// and the bundled captures of the page's menu, all from the binary.
func checkReplayInstalled(t *testing.T, ctx context.Context, bin, dir, root string) {
	t.Helper()
	capture, err := os.ReadFile(filepath.Join(root, "cmd", "iwarp", "testdata", "siw-terminate.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "session.pcap"), capture, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "iwarp"), "replay", "--addr", "127.0.0.1:0", "session.pcap")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + dir, "HOME=" + dir}
	page, stderr := startServing(t, cmd)
	base, _, _ := strings.Cut(page, "?")
	get := func(path string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
		return b
	}
	if !strings.Contains(page, "?capture=replay%2Fsession.pcap") {
		t.Errorf("iwarp replay's URL: %s", page)
	}
	if !bytes.Contains(get(""), []byte(`<script src="replay.js">`)) {
		t.Error("the installed replay's page has no replay.js")
	}
	if !bytes.Equal(get("replay/session.pcap"), capture) {
		t.Error("the installed replay serves another capture than it was given")
	}
	if !bytes.Contains(get("captures/index.json"), []byte("siw-terminate.pcap")) || len(get("captures/rping-tcp.pcap")) == 0 {
		t.Error("the installed replay does not serve the bundled captures")
	}
	if strings.Contains(stderr.String(), "building the browser peer") {
		t.Errorf("the installed replay built the browser peer:\n%s", stderr.String())
	}
	t.Logf("the installed iwarp replay served the page, the capture and the bundled captures from a directory with only the capture")
}
