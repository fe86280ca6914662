//go:build ignore

// gen builds the browser peer into static/ and records the stamp of its
// sources (run by go generate ./web; commit what it writes).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/iwarpgo/iwarp/web"
)

func main() {
	ctx := context.Background()
	gz, execJS, err := web.BuildWasm(ctx, "")
	if err == nil {
		err = os.WriteFile(filepath.Join("static", web.WasmGzName), gz, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join("static", web.WasmExecName), execJS, 0o644)
	}
	var stamp string
	if err == nil {
		stamp, err = web.SourceStamp(ctx, "")
	}
	if err == nil {
		err = os.WriteFile(web.StampName, []byte(stamp+"\n"), 0o644)
	}
	var n int64
	if err == nil {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(gz)); err == nil {
			n, err = io.Copy(io.Discard, zr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("static/%s: %d octets, %d gzipped (limit %d); built with %s\n", web.WasmGzName, n, len(gz), web.MaxWasmSize, runtime.Version())
}
