package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/web"
)

// TestDemoInBrowser runs web/e2e/demo.test.mjs in each browser installed
// (eachBrowser: Debian's chromium and firefox-esr, a subtest each) against
// "iwarp demo" with the browser peer built now (GOOS=js GOARCH=wasm). It
// connects to the Go peer, does a Write, a Read and a Send, checks the
// grids and completions, provokes a Terminate and pairs two tabs.
// Screenshots go to .artifacts/demo-e2e/BROWSER. A browser's subtest is
// skipped only when the browser or node is not installed; npm ci runs if
// web/e2e/node_modules is missing.
func TestDemoInBrowser(t *testing.T) {
	var assets web.Assets // built for the first browser, served to each
	eachBrowser(t, func(t *testing.T, b browserTest) {
		if assets == nil {
			assets = demoAssets(t, b.root)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		url := serveDemo(t, assets)

		artifacts := filepath.Join(b.root, ".artifacts", "demo-e2e", b.name)
		cmd := exec.CommandContext(ctx, b.node, "demo.test.mjs", url)
		cmd.Dir = b.e2e
		cmd.Env = b.env(artifacts)
		if raceEnabled {
			// The 1,000 placements a second is checked without
			// -race, in either browser; with it, the Go peer runs several
			// times slower.
			cmd.Env = append(cmd.Env, "IWARP_E2E_MIN_RATE=400")
			t.Log("built with -race: the burst must reach 400 placements a second, not 1000")
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("demo.test.mjs in %s (%.1f s):\n%s", b.name, time.Since(start).Seconds(), out)
		if err != nil {
			t.Fatalf("the browser test failed in %s: %v (screenshots in %s)", b.name, err, artifacts)
		}
	})
}

// demoAssets is the page's files with the browser peer built now from
// the repository at root.
func demoAssets(t *testing.T, root string) web.Assets {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gz, execJS, err := web.BuildWasm(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, zr)
	t.Logf("iwarp.wasm: %d octets, %d gzipped (limit %d)", n, len(gz), web.MaxWasmSize)
	assets, err := web.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	assets[web.WasmGzName], assets[web.WasmExecName] = gz, execJS
	return assets
}

// syncWriter collects the demo server's log.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
