//go:build !js

package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// buildProgram builds src, a whole program from the documentation, as a
// new user would: in a module of its own that requires this one (replaced
// by the working tree), with this module's go.sum and no network.
func buildProgram(t *testing.T, src string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module example.com/fromdocs")
	mod += "\nrequire github.com/iwarpgo/iwarp v0.0.0\n\nreplace github.com/iwarpgo/iwarp => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the program:\n%s\n%v\n%s", src, err, out)
	}
	return exe
}

// block returns the only fenced block of md whose info string is info.
func block(t *testing.T, file, info string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(b), info)
	if len(blocks) != 1 {
		t.Fatalf("%s has %d ```%s blocks, want 1", file, len(blocks), info)
	}
	return blocks[0] + "\n"
}

// runAgainst runs exe with args and checks its output has each of want.
func runAgainst(t *testing.T, exe string, want []string, args ...string) {
	t.Helper()
	out, err := exec.Command(exe, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Fatalf("%s printed\n%s\nwant %q", strings.Join(args, " "), out, w)
		}
	}
}

// The README's "Using it" block is a whole program: it builds, and talks
// to iwarp serve.
func TestREADMEUsingIt(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Using it\n")
	if !ok {
		t.Fatal(`README.md has no "## Using it"`)
	}
	blocks := fencedBlocks(after, "go")
	if len(blocks) == 0 {
		t.Fatal(`no go block under "## Using it"`)
	}
	exe := buildProgram(t, blocks[0]+"\n")
	s := startServe(t, "--listen", "tcp://127.0.0.1:0")
	url := s.next("listening")["url"].(string)
	runAgainst(t, exe, []string{`read back "hello, server"`}, url)
	s.next("connected")
	s.stop()
}

// TestGuideClientOfServe builds the guide's client of iwarp serve from
// the guide alone and runs it against the built command over each
// transport; over sctp:// it pins the fingerprint serve prints, and serve
// accepts it without a certificate.
func TestGuideClientOfServe(t *testing.T) {
	exe := buildProgram(t, block(t, "guide.md", "go client"))
	want := []string{"the region from octet 250: fa 00 01 02", `wrote and read back "hello"`}
	for _, listen := range []string{"tcp://127.0.0.1:0", "sctp://127.0.0.1:0"} {
		t.Run(listen[:strings.Index(listen, ":")], func(t *testing.T) {
			s := startServe(t, "--listen", listen)
			ev := s.next("listening")
			args := []string{ev["url"].(string)}
			if fp, ok := ev["fingerprint"].(string); ok {
				args = append(args, fp)
			} else if strings.HasPrefix(listen, "sctp") {
				t.Fatal("serve printed no fingerprint")
			}
			runAgainst(t, exe, want, args...)
			if recv := s.next("recv"); recv["len"] != float64(2) {
				t.Fatalf("serve received %v", recv)
			}
			s.stop()
		})
	}
}
