//go:build !js

// Package docs_test checks the documents in this directory against the
// code: the guide's snippets, the conformance table's test names, the
// labs' commands and the Wireshark dissector.
package docs_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// iwarpBinary builds cmd/iwarp once for every test of the package.
func iwarpBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "iwarp-docs-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "iwarp")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/iwarp").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build ./cmd/iwarp: " + e.err.Error() + "\n" + e.out }

// server is a running "iwarp serve --json".
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	events chan map[string]any
	done   chan struct{}
}

func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(iwarpBinary(t), append([]string{"serve", "--json"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, events: make(chan map[string]any, 64), done: make(chan struct{})}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				s.events <- ev
			}
		}
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	return s
}

// next returns the next event of the kind, skipping others.
func (s *server) next(kind string) map[string]any {
	s.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("serve exited before a %q event", kind)
			}
			if ev["event"] == kind {
				return ev
			}
		case <-timeout:
			s.t.Fatalf("no %q event from serve", kind)
		}
	}
}

// stop ends the server with SIGINT and waits for it to exit.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatal("serve did not stop on SIGINT")
	}
}
