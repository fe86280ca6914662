package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBuildWasm builds the browser peer for js/wasm, as go generate and
// iwarp demo do, and checks it is a WebAssembly module within the size
// limit.
func TestBuildWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wasm binary; not with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gz, execJS, err := BuildWasm(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		t.Errorf("not a WebAssembly module: % x", bin[:min(8, len(bin))])
	}
	if len(bin) > MaxWasmSize {
		t.Errorf("%d octets, over %d", len(bin), MaxWasmSize)
	}
	if !bytes.Contains(execJS, []byte("globalThis.Go")) {
		t.Error("wasm_exec.js does not define Go")
	}
	t.Logf("iwarp.wasm: %d octets, %d gzipped", len(bin), len(gz))
}

func TestEmbeddedPage(t *testing.T) {
	a, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		if len(a[name]) == 0 {
			t.Errorf("%s is not embedded", name)
		}
	}
	// Nothing is fetched from elsewhere: the page works offline.
	for name, b := range a {
		if name == WasmGzName {
			continue
		}
		for _, ext := range []string{"http://", "https://", "//cdn"} {
			if bytes.Contains(b, []byte("src=\""+ext)) || bytes.Contains(b, []byte("href=\""+ext)) {
				t.Errorf("%s loads something from %s", name, ext)
			}
		}
	}
}

// TestWasmUpToDate checks that the committed browser peer was built from
// the sources as they are: its stamp matches theirs. When it fails, run
// "go generate ./web" and commit static/iwarp.wasm.gz, static/wasm_exec.js
// and iwarp.wasm.stamp.
func TestWasmUpToDate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, err := SourceStamp(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(StampName)
	if err != nil {
		t.Fatalf("%v: run go generate ./web", err)
	}
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("static/%s was built from other sources than these (stamp %q, sources %q): run go generate ./web and commit static/%s, static/%s and %s",
			WasmGzName, strings.TrimSpace(string(got)), want, WasmGzName, WasmExecName, StampName)
	}
	a, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if len(a[WasmGzName]) == 0 || len(a[WasmExecName]) == 0 {
		t.Errorf("the browser peer is not embedded")
	}
}

// TestWasmLinksNoPion: the browser peer drives the browser's own
// RTCDataChannel and needs none of pion's WebRTC, SCTP or DTLS; sctpddp
// keeps them in files the js/wasm build leaves out, and this keeps it so.
func TestWasmLinksNoPion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := goCmd(ctx, "", "list", "-deps", WasmPackage)
	if err != nil {
		t.Fatal(err)
	}
	sessions := false
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/pion/") {
			t.Errorf("the browser peer links %s", p)
		}
		sessions = sessions || p == "github.com/iwarpgo/iwarp/sctpddp"
	}
	if !sessions {
		t.Errorf("the browser peer does not link sctpddp's sessions:\n%s", out)
	}
}
