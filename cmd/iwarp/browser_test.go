package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/web"
)

// pageBrowser is a browser the page's tests drive (web/e2e/browser.mjs):
// Debian's chromium and firefox-esr.
type pageBrowser struct {
	name string // IWARP_BROWSER for browser.mjs, and the subtest's name
	env  string // the environment variable that names another executable
	path string // where Debian installs it
	pkg  string // the Debian package that installs it
}

var pageBrowsers = []pageBrowser{
	{name: "chromium", env: "CHROMIUM", path: "/usr/bin/chromium", pkg: "chromium"},
	{name: "firefox", env: "FIREFOX", path: "/usr/bin/firefox-esr", pkg: "firefox-esr"},
}

// browserTest is what a test that drives the page in one browser needs:
// the browser's name and executable, node, the repository's root and
// web/e2e with its Node modules installed (npm ci when they are missing).
type browserTest struct {
	name, exe, node, root, e2e string
}

// env is the environment of a web/e2e script driving b's browser, its
// screenshots in dir.
func (b browserTest) env(dir string) []string {
	return append(os.Environ(), "IWARP_BROWSER="+b.name, "IWARP_BROWSER_PATH="+b.exe, "IWARP_ARTIFACTS="+dir)
}

// eachBrowser runs f as a subtest in each of pageBrowsers, named after
// it; needBrowser skips the subtest of a browser that is not installed.
func eachBrowser(t *testing.T, f func(t *testing.T, b browserTest)) {
	t.Helper()
	if testing.Short() {
		t.Skip("a browser test; not with -short")
	}
	for _, pb := range pageBrowsers {
		t.Run(pb.name, func(t *testing.T) { f(t, needBrowser(t, pb)) })
	}
}

// needBrowser returns what driving the page in pb needs. It skips the
// test with -short, or without pb's executable or node.
func needBrowser(t *testing.T, pb pageBrowser) browserTest {
	t.Helper()
	if testing.Short() {
		t.Skip("a browser test; not with -short")
	}
	b := browserTest{name: pb.name, exe: os.Getenv(pb.env)}
	if b.exe == "" {
		b.exe = pb.path
	}
	if _, err := os.Stat(b.exe); err != nil {
		t.Skipf("no %s at %s (apt-get install %s): %v", pb.name, b.exe, pb.pkg, err)
	}
	var err error
	if b.node, err = exec.LookPath("node"); err != nil {
		t.Skip("no node (apt-get install nodejs npm)")
	}
	if b.root, err = filepath.Abs("../.."); err != nil {
		t.Fatal(err)
	}
	b.e2e = filepath.Join(b.root, "web", "e2e")
	for _, m := range []string{"playwright-core", "puppeteer-core"} {
		if _, err := os.Stat(filepath.Join(b.e2e, "node_modules", m)); err == nil {
			continue
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = b.e2e
		cmd.Env = append(os.Environ(), "PUPPETEER_SKIP_DOWNLOAD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in web/e2e: %v\n%s", err, out)
		}
		break
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

// serveDemo serves the demo's page with assets on a loopback port until
// the test ends, and returns its URL.
func serveDemo(t *testing.T, assets web.Assets) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log syncWriter
	d := demo.New(demo.Config{Assets: assets, Log: &log, Addr: ln.Addr()})
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/"
}
