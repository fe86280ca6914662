//go:build !js

package docs_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// readmeCommands returns the commands of the README's section title: its
// indented lines, without their comments.
func readmeCommands(t *testing.T, title string) []string {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	for line := range strings.Lines(string(b)) {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == title
		case in && strings.HasPrefix(line, "    "):
			cmd, _, _ := strings.Cut(line, " # ")
			cmds = append(cmds, strings.TrimSpace(cmd))
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("README.md has no commands under %q", title)
	}
	return cmds
}

// TestREADMEMoreToTry runs every command of the README's "More to try"
// as a fresh clone would: the files they name are in the repository
// (tracked by git, inside it), and each runs from the repository's root
// and succeeds. Servers (--listen) run until they say they listen, and
// stop on SIGINT; the loopback ports are free ones instead of the README's.
// With -short only the commands that need no server run.
func TestREADMEMoreToTry(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	_, gitErr := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree").Output()
	bin := iwarpBinary(t)
	// example builds ./examples/name once, beside the iwarp binary.
	example := func(name string) string {
		exe := filepath.Join(filepath.Dir(bin), "example-"+name)
		if _, err := os.Stat(exe); err != nil {
			if out, err := exec.Command("go", "build", "-o", exe, "../examples/"+name).CombinedOutput(); err != nil {
				t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
			}
		}
		return exe
	}
	ports := map[string]string{}
	loopback := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	var servers []*readmeServer
	defer func() {
		for _, s := range servers {
			s.stop(t)
		}
	}()
	for _, line := range readmeCommands(t, "## More to try") {
		bg := strings.HasSuffix(line, " &")
		args := strings.Fields(strings.TrimSuffix(line, " &"))
		for _, a := range args {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "://") || !strings.Contains(a, "/") {
				continue
			}
			p := filepath.Clean(a)
			if filepath.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
				t.Errorf("%s: %s is outside the repository", line, a)
				continue
			}
			if gitErr == nil {
				if out, err := exec.Command("git", "-C", root, "ls-files", "--error-unmatch", "--", p).CombinedOutput(); err != nil {
					t.Errorf("%s: %s is not in the repository: %s", line, a, out)
				}
			} else if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: %v", line, err)
			}
		}
		switch {
		case len(args) >= 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/iwarp":
			args = append([]string{bin}, args[3:]...)
		case len(args) >= 3 && args[0] == "go" && args[1] == "run" && strings.HasPrefix(args[2], "./examples/"):
			args = append([]string{example(strings.TrimPrefix(args[2], "./examples/"))}, args[3:]...)
		default:
			t.Errorf("%s: not a command of this repository", line)
			continue
		}
		addr := ""
		for i, a := range args {
			args[i] = loopback.ReplaceAllStringFunc(a, func(old string) string {
				if ports[old] == "" {
					ports[old] = freePort(t)
				}
				addr = ports[old]
				return addr
			})
		}
		server := bg || slices.Contains(args, "--listen")
		if testing.Short() && (server || slices.Contains(args, "--connect")) {
			t.Logf("-short: %s not run", line)
			continue
		}
		if server {
			if addr == "" {
				t.Fatalf("%s: a server without a loopback address", line)
			}
			s := startServer(t, root, args)
			waitListening(t, line, addr, s.out)
			if bg {
				servers = append(servers, s)
			} else { // the README's reader stops it with ^C
				s.stop(t)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = root
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || len(out) == 0 {
			t.Errorf("%s: %v\n%s", line, err, out)
		}
		t.Logf("%s: %d bytes of output in %v", line, len(out), time.Since(start).Round(time.Millisecond))
	}
}

// freePort returns a loopback address with a port nothing listens on.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitListening waits until a server says it listens on addr.
func waitListening(t *testing.T, line, addr string, out *syncBuffer) {
	t.Helper()
	waitfor.True(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "listening") },
		"%s does not listen on %s:\n%s", line, addr, out)
}

// readmeServer is a command that runs until SIGINT.
type readmeServer struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	cancel context.CancelFunc
}

func startServer(t *testing.T, dir string, args []string) *readmeServer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &readmeServer{cmd: exec.CommandContext(ctx, args[0], args[1:]...), out: &syncBuffer{}, cancel: cancel}
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, s.out, s.out
	s.cmd.Cancel = func() error { return s.cmd.Process.Signal(os.Interrupt) }
	s.cmd.WaitDelay = 10 * time.Second // then SIGKILL
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return s
}

// stop sends SIGINT and checks that the command exits cleanly.
func (s *readmeServer) stop(t *testing.T) {
	s.cancel()
	if err := s.cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("%s, stopped with SIGINT: %v\n%s", strings.Join(s.cmd.Args, " "), err, s.out.String())
	}
}
