//go:build ignore

// gen builds the browser peer into static/ (run by go generate ./web).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/iwarpgo/iwarp/web"
)

func main() {
	gz, execJS, err := web.BuildWasm(context.Background(), "")
	if err == nil {
		err = os.WriteFile(filepath.Join("static", web.WasmGzName), gz, 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join("static", web.WasmExecName), execJS, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("static/%s: %d octets gzipped\n", web.WasmGzName, len(gz))
}
