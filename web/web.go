// Package web is the browser demo's page: index.html, app.js and
// style.css, the browser peer (wasm/, built for GOOS=js GOARCH=wasm and
// stored gzipped as iwarp.wasm.gz) and Go's wasm_exec.js, embedded so
// that "iwarp demo" serves everything itself, offline, from any
// directory (README.md, "The wasm binary is committed").
//
// "go generate ./web" rebuilds the browser peer and records a stamp of
// its sources (iwarp.wasm.stamp); TestWasmUpToDate fails when the
// sources moved on without it. When a binary was built without the
// browser peer, Load builds it at run time: from the module in the
// working directory, or from the module the binary came from (its copy
// in the module cache).
package web

//go:generate go run gen.go

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

//go:embed static
var static embed.FS

// Names of the generated files in static/, and of the stamp beside it.
const (
	WasmGzName   = "iwarp.wasm.gz"
	WasmExecName = "wasm_exec.js"
	StampName    = "iwarp.wasm.stamp"
	// MaxWasmSize is the limit on the uncompressed binary.
	MaxWasmSize = 8 << 20
	// Module is this module's path; WasmPackage the browser peer's.
	Module      = "github.com/iwarpgo/iwarp"
	WasmPackage = Module + "/wasm"
)

// Assets are the files the demo serves, by name (no directories).
type Assets map[string][]byte

// Load returns the embedded files. If the browser peer is not embedded,
// it is built with "go build": from the module in the current directory
// when that is this module, else from the module this binary was built
// from; progress goes to log.
func Load(ctx context.Context, log io.Writer) (Assets, error) {
	a, err := Embedded()
	if err != nil {
		return nil, err
	}
	if a[WasmGzName] != nil && a[WasmExecName] != nil {
		return a, nil
	}
	dir, err := moduleDir(ctx)
	if err != nil {
		return nil, fmt.Errorf("this binary has no browser peer embedded, and it cannot be built: %w", err)
	}
	fmt.Fprintf(log, "building the browser peer (GOOS=js GOARCH=wasm go build %s) in %s\n", WasmPackage, dir)
	gz, execJS, err := BuildWasm(ctx, dir)
	if err != nil {
		return nil, err
	}
	a[WasmGzName], a[WasmExecName] = gz, execJS
	return a, nil
}

// moduleDir finds sources of this module to build the browser peer
// from: the working directory's module, or the module cache's copy of
// the version this binary was built from.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err == nil {
		if path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " "); ok && path == Module {
			return dir, nil
		}
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != Module || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "", errors.New("neither the working directory nor the binary's build information names a version of " + Module)
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+bi.Main.Version)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err = cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v", Module, bi.Main.Version, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory", Module, bi.Main.Version)
	}
	return m.Dir, nil
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

// goCmd runs the go command in dir for js/wasm, outside any workspace.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// BuildWasm builds the browser peer for js/wasm, stripped, in dir (""
// for the current directory), and returns it gzipped with the
// toolchain's wasm_exec.js. It fails if the binary exceeds MaxWasmSize.
func BuildWasm(ctx context.Context, dir string) (wasmGz, wasmExec []byte, err error) {
	tmp, err := os.MkdirTemp("", "iwarp-wasm")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "iwarp.wasm")
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}
	if _, err := goCmd(ctx, dir, append(args, WasmPackage)...); err != nil {
		return nil, nil, fmt.Errorf("building the browser peer: %w", err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, nil, err
	}
	if len(bin) > MaxWasmSize {
		return nil, nil, fmt.Errorf("the browser peer is %d octets, over the %d limit", len(bin), MaxWasmSize)
	}
	root, err := goCmd(ctx, dir, "env", "GOROOT")
	if err != nil {
		return nil, nil, err
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

// SourceStamp returns a digest of what the browser peer is built from,
// other than the Go toolchain: every Go file of this module that the
// js/wasm build of the wasm package compiles (its path and contents),
// and the version of every other module it uses. go generate records it in iwarp.wasm.stamp.
func SourceStamp(ctx context.Context, dir string) (string, error) {
	out, err := goCmd(ctx, dir, "list", "-deps", "-json=ImportPath,Dir,GoFiles,EmbedFiles,Module,Standard", WasmPackage)
	if err != nil {
		return "", err
	}
	var lines []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
			EmbedFiles []string
			Standard   bool
			Module     *struct{ Path, Version string }
		}
		if err := dec.Decode(&p); err != nil {
			return "", err
		}
		switch {
		case p.Standard || p.Module == nil:
		case p.Module.Path != Module:
			lines = append(lines, "module "+p.Module.Path+"@"+p.Module.Version)
		default:
			files := append(append([]string{}, p.GoFiles...), p.EmbedFiles...)
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(p.Dir, f))
				if err != nil {
					return "", err
				}
				sum := sha256.Sum256(b)
				lines = append(lines, fmt.Sprintf("file %s/%s %x", strings.TrimPrefix(p.ImportPath, Module), filepath.ToSlash(f), sum[:8]))
			}
		}
	}
	sort.Strings(lines)
	lines = compact(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "sources sha256:" + hex.EncodeToString(sum[:]), nil
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
