package mpa

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp/internal/pcapfile"
)

// TestTsharkLive captures real loopback TCP connections carrying MPA
// sessions with tshark (dumpcap), then checks the capture two ways: the
// streams reassembled by pcapfile from the pcapng file parse with this
// package, and tshark's dissection shows what was sent with good CRCs.
func TestTsharkLive(t *testing.T) {
	tshark := needTshark(t)
	if testing.Short() {
		t.Skip("live capture skipped in -short mode")
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil || lo.Flags&net.FlagUp == 0 {
		t.Skip("no loopback interface lo")
	}

	// One listener per session, plus one for probing the capture.
	listen := func() net.Listener {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	probe := listen()
	go func() {
		for {
			c, err := probe.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	lns := make([]net.Listener, len(tsharkSessions))
	ports := []string{fmt.Sprint(probe.Addr().(*net.TCPAddr).Port)}
	for i := range lns {
		lns[i] = listen()
		ports = append(ports, fmt.Sprint(lns[i].Addr().(*net.TCPAddr).Port))
	}
	filter := "tcp port " + strings.Join(ports, " or tcp port ")

	dir := t.TempDir()
	if d := os.Getenv("IWARP_KEEP_PCAP"); d != "" {
		dir = d
	}
	file := filepath.Join(dir, "live.pcapng")
	cmd := exec.Command(tshark, "-i", "lo", "-f", filter, "-w", file, "-l", "-P", "-q")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start tshark: %v", err)
	}
	// The packet summaries tshark prints as it captures (-P -l). Packets
	// reach tshark in blocks, in capture order: once a probe connection
	// made after some traffic shows up, all of that traffic has too.
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	probed := func(timeout time.Duration) bool {
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
			c, err := net.Dial("tcp4", probe.Addr().String())
			if err != nil {
				return false
			}
			port := fmt.Sprintf(" %d ", c.LocalAddr().(*net.TCPAddr).Port)
			c.Close()
			for range 10 {
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				for _, l := range lines {
					if strings.Contains(l, port) {
						mu.Unlock()
						return true
					}
				}
				mu.Unlock()
			}
		}
		return false
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	defer stop()

	// Wait until the capture sees traffic.
	if !probed(15 * time.Second) {
		stop()
		if s := stderr.String(); strings.Contains(s, "ermission") || strings.Contains(s, "don't have") {
			t.Skipf("tshark cannot capture here: %s", s)
		}
		t.Fatalf("capture never became ready; tshark said: %s", stderr.String())
	}

	// The sessions, one connection each.
	clientPorts := make([]uint16, len(tsharkSessions))
	for i, o := range tsharkSessions {
		acc := make(chan net.Conn, 1)
		go func() {
			c, err := lns[i].Accept()
			if err != nil {
				acc <- nil
				return
			}
			acc <- c
		}()
		client, err := net.Dial("tcp4", lns[i].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server := <-acc
		if server == nil {
			t.Fatal("accept failed")
		}
		clientPorts[i] = uint16(client.LocalAddr().(*net.TCPAddr).Port)
		req, rep := o.frames()
		runMPA(t, client, server, req, rep)
		client.Close()
		server.Close()
	}
	// Wait until everything so far has been captured, then stop.
	if !probed(15 * time.Second) {
		t.Fatalf("capture stalled; tshark said: %s", stderr.String())
	}
	stop()

	// 1. Our own reading of the capture: pcapng, TCP reassembly, then
	// the MPA frames and FPDUs.
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := pcapfile.ReadStreams(f)
	f.Close()
	if err != nil {
		t.Fatalf("reading the capture: %v", err)
	}
	views := tsharkDissect(t, tshark, file)
	for i, o := range tsharkSessions {
		server := netip.MustParseAddrPort(lns[i].Addr().String())
		client := netip.AddrPortFrom(server.Addr(), clientPorts[i])
		up := pcapfile.Lookup(streams, pcapfile.Flow{Src: client, Dst: server})
		down := pcapfile.Lookup(streams, pcapfile.Flow{Src: server, Dst: client})
		if up == nil || down == nil || !up.SYN || !down.SYN {
			t.Fatalf("%s: connection not captured from its start", o.name)
		}
		req, n, err := ParseFrame(up.Data)
		if err != nil {
			t.Fatal(err)
		}
		rep, m, err := ParseFrame(down.Data)
		if err != nil {
			t.Fatal(err)
		}
		fi, fr := Negotiate(&req, &rep)
		for _, dir := range []struct {
			b          []byte
			o          Options
			fromClient bool
		}{{up.Data[n:], fi, true}, {down.Data[m:], fr, false}} {
			r := NewReader(bytes.NewReader(dir.b), dir.o)
			if err := expectFPDUs(r, dir.fromClient, make(chan struct{}, len(tsharkSession))); err != nil {
				t.Fatalf("%s: captured stream: %v", o.name, err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("%s: after the FPDUs: %v", o.name, err)
			}
		}

		// 2. tshark's reading of this connection.
		t.Run(o.name, func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("tshark -V:\n%s", tsharkVerbose(tshark, file))
				}
			}()
			checkDissection(t, views, clientPorts[i], o, up.Data[n:], down.Data[m:])
		})
	}
}
