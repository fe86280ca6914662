//go:build !js

package docs_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// syncBuffer collects a command's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// labEnv is where the commands of one lab run: from the repository's
// root, with iwarp on the PATH and $LAB a fresh directory.
type labEnv struct {
	t    *testing.T
	root string
	env  []string
	tour string
}

type bgJob struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func (e *labEnv) command(ctx context.Context, line string) *exec.Cmd {
	line = strings.ReplaceAll(line, "go run ./examples/tour", e.tour)
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = e.root
	cmd.Env = e.env
	return cmd
}

// runBlock runs the lines of one ```lab block.
func (e *labEnv) runBlock(block string) {
	t := e.t
	var jobs []*bgJob
	defer func() {
		for _, j := range jobs {
			j.cmd.Process.Kill()
			<-j.done
		}
	}()
	last := "" // the output the next "# expect:" applies to
	lastCmd := ""
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "$ kill %"), strings.HasPrefix(line, "$ wait %"):
			// kill interrupts a background job; wait lets it end by
			// itself (a server run with --once).
			kill := strings.HasPrefix(line, "$ kill %")
			n, err := strconv.Atoi(line[len("$ kill %"):])
			if err != nil || n < 1 || n > len(jobs) {
				t.Fatalf("bad job in %q", line)
			}
			j := jobs[n-1]
			limit := 30 * time.Second
			if kill {
				j.cmd.Process.Signal(os.Interrupt)
				limit = 10 * time.Second
			}
			select {
			case <-j.done:
			case <-time.After(limit):
				t.Fatalf("%q: job %d did not end", line, n)
			}
			last, lastCmd = j.out.String(), line
		case strings.HasPrefix(line, "$ ") && strings.HasSuffix(line, " &"):
			cmdline := strings.TrimSuffix(strings.TrimPrefix(line, "$ "), " &")
			cmd := e.command(context.Background(), cmdline)
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatalf("%s: %v", cmdline, err)
			}
			j := &bgJob{cmd: cmd, out: out, done: make(chan struct{})}
			go func() { cmd.Wait(); close(j.done) }()
			jobs = append(jobs, j)
			last, lastCmd = "", line
		case strings.HasPrefix(line, "# ready: "):
			if len(jobs) == 0 {
				t.Fatalf("%q without a background command", line)
			}
			j := jobs[len(jobs)-1]
			want := strings.TrimPrefix(line, "# ready: ")
			printed := func() bool { return strings.Contains(j.out.String(), want) }
			if !waitfor.Until(60*time.Second, func() bool { return printed() || closed(j.done) }) {
				t.Fatalf("%s did not print %q:\n%s", lastCmd, want, j.out.String())
			}
			if !printed() {
				t.Fatalf("%s exited before printing %q:\n%s", lastCmd, want, j.out.String())
			}
			// A job that printed the text in an error ("listening on
			// ...: address already in use") and exited is not ready.
			time.Sleep(50 * time.Millisecond)
			if closed(j.done) {
				t.Fatalf("%s exited after printing %q:\n%s", lastCmd, want, j.out.String())
			}
		case strings.HasPrefix(line, "$ "):
			cmdline := strings.TrimPrefix(line, "$ ")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := e.command(ctx, cmdline).CombinedOutput()
			cancel()
			if err != nil && !strings.Contains(cmdline, "| grep") && !strings.Contains(cmdline, "| head") {
				t.Errorf("%s: %v\n%s", cmdline, err, out)
			}
			last, lastCmd = string(out), line
		case strings.HasPrefix(line, "# expect: "):
			re, err := regexp.Compile(strings.TrimPrefix(line, "# expect: "))
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if !re.MatchString(last) {
				t.Errorf("%s\nthe output does not match %q:\n%s", lastCmd, re, last)
			}
		case line == "":
		default:
			t.Fatalf("unknown line in a lab block: %q", line)
		}
	}
}

// TestLabs runs the ```lab blocks of docs/labs/*.md and checks their
// expected output (see docs/labs/README.md for the syntax).
func TestLabs(t *testing.T) {
	if testing.Short() {
		t.Skip("the labs run real sessions; skipped in -short mode")
	}
	bin := iwarpBinary(t)
	tour := filepath.Join(filepath.Dir(bin), "tour")
	if _, err := os.Stat(tour); err != nil {
		if out, err := exec.Command("go", "build", "-o", tour, "../examples/tour").CombinedOutput(); err != nil {
			t.Fatalf("go build ./examples/tour: %v\n%s", err, out)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	_, errTshark := exec.LookPath("tshark")
	_, errCurl := exec.LookPath("curl")
	// The Linux guest of lab 8, if its build is cached (build.sh --check
	// builds nothing).
	guestBuilt := exec.Command("bash", filepath.Join(root, "scripts", "linux-guest", "build.sh"), "--check").Run() == nil
	files, _ := filepath.Glob("labs/*.md")
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := fencedLabBlocks(string(md))
		if len(blocks) == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".md"), func(t *testing.T) {
			e := &labEnv{t: t, root: root, tour: tour,
				env: append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "LAB="+t.TempDir())}
			for _, b := range blocks {
				if strings.Contains(b, "tshark ") && errTshark != nil {
					t.Log("tshark is not installed: a block skipped (scripts/test.sh installs it)")
					continue
				}
				if strings.Contains(b, "docs/labs/code/lab8guest") && !guestBuilt {
					t.Log("the Linux guest is not built (bash scripts/linux-guest/build.sh): a block skipped")
					continue
				}
				if strings.Contains(b, "curl ") && errCurl != nil {
					t.Log("curl is not installed: a block skipped")
					continue
				}
				e.runBlock(b)
			}
		})
	}
}

// fencedLabBlocks returns the ```lab blocks of md, indented or not.
func fencedLabBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(md) {
		s := strings.TrimSpace(line)
		switch {
		case !in && s == "```lab":
			in, cur = true, nil
		case in && s == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, s)
		}
	}
	return blocks
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
