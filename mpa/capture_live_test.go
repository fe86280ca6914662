package mpa

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/waitfor"
)

// liveCapture is a tshark capture on the loopback interface of some TCP
// ports, running while a test makes traffic.
type liveCapture struct {
	t      *testing.T
	file   string
	cmd    *exec.Cmd
	probe  net.Listener
	stderr bytes.Buffer
	mu     sync.Mutex
	lines  []string
	done   bool
}

// startCapture starts tshark on lo for the given ports and returns once
// the capture demonstrably sees traffic. It skips the test when tshark
// cannot capture here (no lo, no permission) or in -short mode.
func startCapture(t *testing.T, tshark string, ports ...int) *liveCapture {
	t.Helper()
	if testing.Short() {
		t.Skip("live capture skipped in -short mode")
	}
	if lo, err := net.InterfaceByName("lo"); err != nil || lo.Flags&net.FlagUp == 0 {
		t.Skip("no loopback interface lo")
	}
	c := &liveCapture{t: t}
	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.probe = probe
	t.Cleanup(func() { probe.Close() })
	go func() {
		for {
			conn, err := probe.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	filter := fmt.Sprintf("tcp port %d", probe.Addr().(*net.TCPAddr).Port)
	for _, p := range ports {
		filter += fmt.Sprintf(" or tcp port %d", p)
	}
	dir := t.TempDir()
	if d := os.Getenv("IWARP_KEEP_PCAP"); d != "" {
		dir = d
	}
	c.file = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".pcapng")
	c.cmd = exec.Command(tshark, "-i", "lo", "-f", filter, "-w", c.file, "-l", "-P", "-q")
	stdout, _ := c.cmd.StdoutPipe()
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Skipf("cannot start tshark: %v", err)
	}
	// The packet summaries tshark prints as it captures (-P -l). Packets
	// reach tshark in blocks, in capture order: once a probe connection
	// made after some traffic shows up, all of that traffic has too.
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.stop)
	if !c.probed(15 * time.Second) {
		c.stop()
		if s := c.stderr.String(); strings.Contains(s, "ermission") || strings.Contains(s, "don't have") {
			t.Skipf("tshark cannot capture here: %s", s)
		}
		t.Fatalf("capture never became ready; tshark said: %s", c.stderr.String())
	}
	return c
}

func (c *liveCapture) probed(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		conn, err := net.Dial("tcp4", c.probe.Addr().String())
		if err != nil {
			return false
		}
		port := fmt.Sprintf(" %d ", conn.LocalAddr().(*net.TCPAddr).Port)
		conn.Close()
		if waitfor.Until(500*time.Millisecond, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, l := range c.lines {
				if strings.Contains(l, port) {
					return true
				}
			}
			return false
		}) {
			return true
		}
	}
	return false
}

func (c *liveCapture) stop() {
	if c.done {
		return
	}
	c.done = true
	c.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// finish waits until everything sent so far is captured, then stops.
func (c *liveCapture) finish() {
	if !c.probed(15 * time.Second) {
		c.t.Fatalf("capture stalled; tshark said: %s", c.stderr.String())
	}
	c.stop()
}
