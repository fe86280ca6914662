package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browserTest is what a test that drives the page in Chromium needs: the
// browser, node, the repository's root and web/e2e with its Node modules
// installed (npm ci when they are missing). It skips the test with -short
// or without chromium or node.
type browserTest struct {
	chromium, node, root, e2e string
}

func needBrowser(t *testing.T) browserTest {
	t.Helper()
	if testing.Short() {
		t.Skip("a browser test; not with -short")
	}
	b := browserTest{chromium: os.Getenv("CHROMIUM")}
	if b.chromium == "" {
		b.chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(b.chromium); err != nil {
		t.Skipf("no chromium at %s (apt-get install chromium): %v", b.chromium, err)
	}
	var err error
	if b.node, err = exec.LookPath("node"); err != nil {
		t.Skip("no node (apt-get install nodejs npm)")
	}
	if b.root, err = filepath.Abs("../.."); err != nil {
		t.Fatal(err)
	}
	b.e2e = filepath.Join(b.root, "web", "e2e")
	if _, err := os.Stat(filepath.Join(b.e2e, "node_modules", "playwright-core")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = b.e2e
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in web/e2e: %v\n%s", err, out)
		}
	}
	return b
}

// startServing starts cmd, a command that serves a page ("iwarp demo",
// "iwarp replay"), and returns the URL it prints after "open ", with its
// standard error; the command is interrupted when the test ends, and
// must stop within 10 s.
func startServing(t *testing.T, cmd *exec.Cmd) (string, *syncWriter) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(syncWriter) // written by exec's copying goroutine while the test reads it
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name := strings.Join(cmd.Args[:min(2, len(cmd.Args))], " ")
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGINT", name)
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "open "); ok {
				urlc <- strings.Fields(rest)[0]
			}
		}
	}()
	select {
	case url := <-urlc:
		return url, stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed no address; stderr:\n%s", name, stderr.String())
		return "", nil
	}
}
