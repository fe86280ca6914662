package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/web"
)

// TestDemoInBrowser runs web/e2e/demo.test.mjs: Debian's chromium, driven
// by playwright-core, against "iwarp demo" with the browser peer built
// now (GOOS=js GOARCH=wasm). It connects to the Go peer, does a Write, a
// Read and a Send, checks the grids and completions, provokes a Terminate
// and pairs two tabs. Screenshots go to .artifacts/demo-e2e. It is
// skipped only when chromium or node is not installed; npm ci runs if
// web/e2e/node_modules is missing.
func TestDemoInBrowser(t *testing.T) {
	b := needBrowser(t)
	chromium, node, root, e2e := b.chromium, b.node, b.root, b.e2e
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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log syncWriter
	d := demo.New(demo.Config{Assets: assets, Log: &log, Addr: ln.Addr()})
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(sctx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()

	artifacts := filepath.Join(root, ".artifacts", "demo-e2e")
	cmd := exec.CommandContext(ctx, node, "demo.test.mjs", fmt.Sprintf("http://%s/", ln.Addr()))
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(), "IWARP_ARTIFACTS="+artifacts, "CHROMIUM="+chromium)
	if raceEnabled {
		// The 1,000 placements a second is checked without -race;
		// with it, the Go peer runs several times slower.
		cmd.Env = append(cmd.Env, "IWARP_E2E_MIN_RATE=400")
		t.Log("built with -race: the burst must reach 400 placements a second, not 1000")
	}
	out, err := cmd.CombinedOutput()
	t.Logf("demo.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v (screenshots in %s)", err, artifacts)
	}
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
