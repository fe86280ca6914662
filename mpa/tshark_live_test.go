package mpa

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
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

	// One listener per session.
	listen := func() net.Listener {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	lns := make([]net.Listener, len(tsharkSessions))
	var ports []int
	for i := range lns {
		lns[i] = listen()
		ports = append(ports, lns[i].Addr().(*net.TCPAddr).Port)
	}
	cap := startCapture(t, tshark, ports...)
	file := cap.file

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
	cap.finish()

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
