package web

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tlsOverlay writes, into tmp, a go build -overlay file under which the
// browser peer's copy of package mpa (in dir) has no TLS: each
// "if ....TLS != nil { tls.Client or tls.Server ... }" block returns an
// error instead. It returns "" when mpa has no such block.
//
// Why: mpa.Config.TLS runs MPA inside TLS, and the two calls that start
// the TLS handshake link crypto/tls's client and server, x509 and their
// curves into every program that uses mpa: 2.3 MB of the browser peer,
// which took it from 6.5 MB past its 8 MB limit. In a browser TLS is the
// page's (wss://), never mpa's, and the page never sets Config.TLS. The
// overlay leaves the source tree alone and changes only what the js/wasm
// build of the browser peer compiles; it stops applying once mpa keeps
// its TLS start-up out of js builds itself (web/README.md).
func tlsOverlay(dir, tmp string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	replace := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if !bytes.Contains(src, []byte("tls.Client(")) && !bytes.Contains(src, []byte("tls.Server(")) {
			continue
		}
		out, ok, err := stripTLS(f, src)
		if err != nil || !ok {
			return "", err
		}
		p := filepath.Join(tmp, "overlay-"+filepath.Base(f))
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return "", err
		}
		replace[f] = p
	}
	if len(replace) == 0 {
		return "", nil
	}
	extra := filepath.Join(tmp, "overlay-notls.go")
	err = os.WriteFile(extra, []byte(`package mpa

import "errors"

// errTLSNotInBrowser: the browser peer's build of mpa has no TLS (see
// web/overlay.go).
var errTLSNotInBrowser = errors.New("mpa: no TLS in the browser peer's build")
`), 0o644)
	if err != nil {
		return "", err
	}
	replace[filepath.Join(dir, "zz_overlay_notls.go")] = extra
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	p := filepath.Join(tmp, "overlay.json")
	return p, os.WriteFile(p, b, 0o644)
}

// stripTLS rewrites one file of mpa as tlsOverlay says; ok is false when
// a TLS call is not in a block of the expected shape.
func stripTLS(name string, src []byte) (out []byte, ok bool, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, false, err
	}
	calls := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if isTLSStart(n) {
			calls++
		}
		return true
	})
	replaced := 0
	ast.Inspect(f, func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok || !isTLSConfigCheck(is.Cond) {
			return true
		}
		inside := 0
		ast.Inspect(is.Body, func(m ast.Node) bool {
			if isTLSStart(m) {
				inside++
			}
			return true
		})
		if inside == 0 {
			return true
		}
		replaced += inside
		is.Body = &ast.BlockStmt{List: []ast.Stmt{&ast.ReturnStmt{Results: []ast.Expr{ast.NewIdent("nil"), ast.NewIdent("errTLSNotInBrowser")}}}}
		return false
	})
	if replaced != calls {
		return nil, false, nil
	}
	// Drop the import if nothing else uses it.
	uses := false
	ast.Inspect(f, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := se.X.(*ast.Ident); ok && id.Name == "tls" {
				uses = true
			}
		}
		return true
	})
	if !uses {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.IMPORT {
				continue
			}
			for i, s := range gd.Specs {
				if p, _ := strconv.Unquote(s.(*ast.ImportSpec).Path.Value); p == "crypto/tls" {
					gd.Specs = append(gd.Specs[:i], gd.Specs[i+1:]...)
					break
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := format.Node(&buf, fset, f); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), true, nil
}

// isTLSStart reports a call of tls.Client or tls.Server.
func isTLSStart(n ast.Node) bool {
	c, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	se, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := se.X.(*ast.Ident)
	return ok && id.Name == "tls" && (se.Sel.Name == "Client" || se.Sel.Name == "Server")
}

// isTLSConfigCheck reports a condition "<x>.TLS != nil".
func isTLSConfigCheck(e ast.Expr) bool {
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.NEQ {
		return false
	}
	se, ok := b.X.(*ast.SelectorExpr)
	if !ok || se.Sel.Name != "TLS" {
		return false
	}
	id, ok := b.Y.(*ast.Ident)
	return ok && id.Name == "nil"
}
