//go:build !js

package docs_test

import (
	"os"
	"strings"
	"testing"
)

// fencedBlocks returns the contents of the fenced blocks of md whose info
// string is lang.
func fencedBlocks(md, lang string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && line == "```"+lang:
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestGuideSnippets checks that every ```go block of guide.md is a run of
// consecutive lines of guide_example_test.go (ignoring each line's
// leading tabs), so the guide shows code that compiles and whose output
// the Examples check.
func TestGuideSnippets(t *testing.T) {
	md, err := os.ReadFile("guide.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("guide_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) []string {
		var out []string
		for line := range strings.Lines(s) {
			out = append(out, strings.TrimLeft(strings.TrimRight(line, "\n"), "\t"))
		}
		return out
	}
	file := norm(string(src))
	blocks := fencedBlocks(string(md), "go")
	if len(blocks) < 8 {
		t.Fatalf("guide.md has %d go blocks, want at least 8", len(blocks))
	}
	for i, b := range blocks {
		lines := norm(b)
		if !containsRun(file, lines) {
			t.Errorf("go block %d of guide.md is not in guide_example_test.go:\n%s", i+1, b)
		}
	}
}

func containsRun(file, run []string) bool {
	for i := 0; i+len(run) <= len(file); i++ {
		ok := true
		for j := range run {
			if file[i+j] != run[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
