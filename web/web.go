// Package web is the browser demo's page: index.html, app.js and
// style.css, the browser peer (wasm/, built for GOOS=js GOARCH=wasm and
// stored gzipped as iwarp.wasm.gz) and Go's wasm_exec.js, embedded so
// that "iwarp demo" serves everything itself, offline.
//
// The wasm binary and wasm_exec.js are build outputs, not committed:
// "go generate ./web" makes them (the tests and the Makefile do so), and
// Assets builds them on the fly when the binary was built without them,
// so that "go run ./cmd/iwarp demo" works from a fresh clone.
package web

//go:generate go run gen.go

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed static
var static embed.FS

// Names of the generated files in static/.
const (
	WasmGzName   = "iwarp.wasm.gz"
	WasmExecName = "wasm_exec.js"
	// MaxWasmSize is the limit on the uncompressed binary.
	MaxWasmSize = 8 << 20
)

// Assets are the files the demo serves, by name (no directories).
type Assets map[string][]byte

// Load returns the embedded files. If the browser peer is not embedded,
// it is built with "go build" from the module in the current directory
// (which must be this module or within it); progress goes to log.
func Load(ctx context.Context, log io.Writer) (Assets, error) {
	a, err := Embedded()
	if err != nil {
		return nil, err
	}
	if a[WasmGzName] != nil && a[WasmExecName] != nil {
		return a, nil
	}
	fmt.Fprintln(log, "building the browser peer (GOOS=js GOARCH=wasm go build ./wasm); go generate ./web embeds it")
	gz, execJS, err := BuildWasm(ctx, "")
	if err != nil {
		return nil, err
	}
	a[WasmGzName], a[WasmExecName] = gz, execJS
	return a, nil
}

// Embedded returns the files embedded in the binary, with or without the
// browser peer.
func Embedded() (Assets, error) {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	a := Assets{}
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, name)
		a[name] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// BuildWasm builds github.com/iwarpgo/iwarp/wasm for js/wasm, stripped,
// in dir ("" for the current directory), and returns it gzipped with the
// toolchain's wasm_exec.js. It fails if the binary exceeds MaxWasmSize.
func BuildWasm(ctx context.Context, dir string) (wasmGz, wasmExec []byte, err error) {
	tmp, err := os.MkdirTemp("", "iwarp-wasm")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "iwarp.wasm")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/iwarpgo/iwarp/wasm")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("building the browser peer: %v\n%s", err, stderr.Bytes())
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, nil, err
	}
	if len(bin) > MaxWasmSize {
		return nil, nil, fmt.Errorf("the browser peer is %d octets, over the %d limit", len(bin), MaxWasmSize)
	}
	root, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go env GOROOT: %v", err)
	}
	goroot := strings.TrimSpace(string(root))
	wasmExec, err = os.ReadFile(filepath.Join(goroot, "lib", "wasm", "wasm_exec.js"))
	if errors.Is(err, fs.ErrNotExist) { // Go before 1.24 kept it in misc/
		wasmExec, err = os.ReadFile(filepath.Join(goroot, "misc", "wasm", "wasm_exec.js"))
	}
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(bin); err != nil {
		return nil, nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), wasmExec, nil
}
