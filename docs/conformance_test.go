//go:build !js

package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testFuncs returns the Test, Fuzz, Benchmark and Example functions of
// the _test.go files in dir (relative to the repository root).
func testFuncs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = true
			}
		}
	}
	return funcs
}

var testRef = regexp.MustCompile("`([a-z][a-z0-9/]*)\\.((?:Test|Fuzz|Example)[A-Za-z0-9_]*)`")

// checkTestRefs checks that every `dir.TestName` in md names a function
// of dir's tests (`iwarp.TestName`: the root package's), and returns how
// many it found.
func checkTestRefs(t *testing.T, name, md string) int {
	t.Helper()
	pkgs := map[string]map[string]bool{}
	n := 0
	for _, m := range testRef.FindAllStringSubmatch(md, -1) {
		dir, fn := m[1], m[2]
		if dir == "iwarp" {
			dir = "." // the root package, github.com/iwarpgo/iwarp
		}
		if _, err := os.Stat(filepath.Join("..", dir)); err != nil {
			t.Errorf("%s names %s.%s: no directory %s", name, m[1], fn, dir)
			continue
		}
		if pkgs[dir] == nil {
			pkgs[dir] = testFuncs(t, dir)
		}
		if !pkgs[dir][fn] {
			t.Errorf("%s names %s.%s, which does not exist", name, dir, fn)
		}
		n++
	}
	return n
}

// TestConformanceTable checks docs/conformance.md: every test it names
// exists in the package it names, and every row says which test checks
// it or why none does.
func TestConformanceTable(t *testing.T) {
	b, err := os.ReadFile("conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if n := checkTestRefs(t, "conformance.md", md); n < 300 {
		t.Errorf("conformance.md names only %d tests", n)
	}
	rows := 0
	for line := range strings.Lines(md) {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| # ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		rows++
		cells := strings.Split(line, " | ")
		last := cells[len(cells)-1]
		if !testRef.MatchString(last) && !strings.HasPrefix(last, "**no test:** ") &&
			!strings.HasPrefix(last, "**not implemented:** ") && !strings.HasPrefix(last, "**not testable:** ") &&
			!strings.HasPrefix(last, "**n/a:** ") {
			t.Errorf("conformance.md row without a test or a reason: %s", line)
		}
	}
	if rows != 463 {
		t.Errorf("conformance.md has %d rows; the six RFCs (5040, 5041, 5043, 5044, 6581, 7306) have 463 sentences with MUST", rows)
	}
}

// TestDocsTestRefs checks the test names the other documents cite.
func TestDocsTestRefs(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	labs, _ := filepath.Glob("labs/*.md")
	for _, f := range append(files, labs...) {
		if f == "conformance.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkTestRefs(t, f, string(b))
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
