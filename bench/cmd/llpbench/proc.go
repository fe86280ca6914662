package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// cpuSeconds returns the user and system CPU time this process has used
// (getrusage RUSAGE_SELF).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// child is this program re-run as a helper process: its first line of
// output is a JSON value, and it ends when its standard input closes
// (when this process ends, however it ends).
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startChild runs this program with args and decodes its first line of
// output into first.
func startChild(first any, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: in}
	line := make(chan []byte, 1)
	go func() {
		r := bufio.NewReader(out)
		b, _ := r.ReadBytes('\n')
		line <- b
		io.Copy(io.Discard, r)
	}()
	select {
	case b := <-line:
		if err := json.Unmarshal(b, first); err != nil {
			c.stop()
			return nil, fmt.Errorf("helper %v: %q: %v", args, b, err)
		}
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, fmt.Errorf("helper %v did not start", args)
	}
	return c, nil
}

// stop closes the child's input and waits a while for it to end, then
// kills it.
func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// untilStdinCloses returns a channel closed when standard input ends: a
// helper's parent has gone.
func untilStdinCloses() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	return done
}
