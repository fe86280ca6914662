package main

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/web"
)

// demoTestVersion is the version the module proxy made from the checkout
// serves.
const demoTestVersion = "v0.0.0-20260101000000-000000000000"

// TestDemoGoInstall does what a user does: "go install
// github.com/iwarpgo/iwarp/cmd/iwarp@VERSION", then "iwarp demo" from an
// empty directory, and fetches the page and the browser peer. The module
// comes from a proxy made from this checkout (GOPROXY=file://..., its
// files as git sees them, tracked or new and not ignored), the other
// modules from the module cache's own download directory, into a fresh
// GOPATH; the installed command runs with no Go toolchain on its PATH, so
// it must serve the wasm it embeds.
func TestDemoGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the command from a module proxy; not with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to list the checkout's files")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	if err := writeModuleProxy(root, proxy, web.Module, demoTestVersion); err != nil {
		t.Fatal(err)
	}
	cache, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	gopath := filepath.Join(tmp, "gopath")
	bin := filepath.Join(tmp, "bin")
	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(empty, 0o755)
	install := exec.CommandContext(ctx, "go", "install", web.Module+"/cmd/iwarp@"+demoTestVersion)
	install.Dir = empty
	install.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(strings.TrimSpace(string(cache)), "cache", "download")),
		// -modcacherw: the fresh module cache is writable, so that the
		// test's temporary directory can be removed.
		"GOFLAGS=-mod=mod -trimpath -modcacherw",
		"GOPATH="+gopath, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"), "GOBIN="+bin,
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GOWORK=off", "GOTOOLCHAIN=local", "GO111MODULE=on")
	start := time.Now()
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	t.Logf("go install %s@%s from the proxy: %v", web.Module+"/cmd/iwarp", demoTestVersion, time.Since(start).Round(time.Millisecond))

	demo := exec.Command(filepath.Join(bin, "iwarp"), "demo", "--addr", "127.0.0.1:0")
	demo.Dir = empty
	demo.Env = []string{"PATH=" + empty, "HOME=" + empty} // no go command to fall back on
	url, stderr := startServing(t, demo)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", url+strings.TrimPrefix(path, "/"), nil)
		req.Header.Set("Accept-Encoding", "gzip")
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	if resp, b := get("/"); resp.StatusCode != 200 || !bytes.Contains(b, []byte("<title>iwarp demo")) {
		t.Errorf("GET /: %d %.100q", resp.StatusCode, b)
	}
	if resp, b := get("/wasm_exec.js"); resp.StatusCode != 200 || !bytes.Contains(b, []byte("globalThis.Go")) {
		t.Errorf("GET /wasm_exec.js: %d", resp.StatusCode)
	}
	resp, gz := get("/iwarp.wasm")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("GET /iwarp.wasm: %d %v", resp.StatusCode, resp.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := io.ReadAll(zr)
	if err != nil || !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatalf("iwarp.wasm: not a WebAssembly module (%v)", err)
	}
	committed, err := os.ReadFile(filepath.Join(root, "web", "static", web.WasmGzName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gz, committed) {
		t.Errorf("the installed command serves another iwarp.wasm.gz than web/static has (%d and %d octets)", len(gz), len(committed))
	}
	t.Logf("the installed iwarp demo served the page and a %d-octet browser peer from an empty directory", len(wasm))
	if strings.Contains(stderr.String(), "building the browser peer") {
		t.Errorf("the installed command built the browser peer instead of serving the embedded one:\n%s", stderr.String())
	}
	checkReplayInstalled(t, ctx, bin, empty, root)
}

// writeModuleProxy lays out a GOPROXY directory serving module mod at
// version v, made from the files of the checkout at root that git lists
// (tracked, or new and not ignored), as "go mod download" expects it: list,
// .info, .mod and a .zip whose paths start with mod@v/.
func writeModuleProxy(root, proxy, mod, v string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %v", err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := strings.Split(string(out), "\x00")
	// A directory with a go.mod of its own (the benchmark module) is
	// another module: a module's zip leaves it out, as the go command's
	// does.
	var nested []string
	for _, name := range names {
		if strings.HasSuffix(name, "/go.mod") {
			nested = append(nested, strings.TrimSuffix(name, "go.mod"))
		}
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	seen := map[string]bool{}
	for _, name := range names {
		if name == "" || seen[name] || slices.ContainsFunc(nested, func(d string) bool { return strings.HasPrefix(name, d) }) {
			continue
		}
		seen[name] = true
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		w, err := zw.Create(mod + "@" + v + "/" + name)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"list":      []byte(v + "\n"),
		v + ".info": []byte(fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, v)),
		v + ".mod":  gomod,
		v + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
