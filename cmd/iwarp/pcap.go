package main

import (
	"net"

	"github.com/iwarpgo/iwarp/capture"
)

// recorder writes a --pcap capture (capture.Recorder) for endpoints of
// one scheme. A nil *recorder records nothing.
type recorder struct{ c *capture.Recorder }

// newRecorder creates the capture file for endpoints of scheme.
func newRecorder(path, scheme string) (*recorder, error) {
	t := capture.TCP
	if scheme == "sctp" {
		t = capture.SCTP
	}
	c, err := capture.NewRecorder(path, t)
	if err != nil {
		return nil, err
	}
	return &recorder{c}, nil
}

// setLocal sets the address of this end in SCTP packets.
func (r *recorder) setLocal(a net.Addr) {
	if r != nil {
		r.c.SetLocal(a)
	}
}

// Close closes the file, returning the recording's first error.
func (r *recorder) Close() error {
	if r == nil {
		return nil
	}
	return r.c.Close()
}

// sctpTrace is sctpddp.Config.Trace.
func (r *recorder) sctpTrace(peer net.Addr, outbound bool, packet []byte) {
	r.c.SCTPTrace(peer, outbound, packet)
}

// tcpRecording is one recorded TCP connection.
type tcpRecording struct{ c *capture.TCPConn }

func (r *recorder) tcpConn() *tcpRecording { return &tcpRecording{r.c.TCPConn()} }

// bind starts the connection in the capture with what was traced so far.
func (t *tcpRecording) bind(client, server net.Addr) { t.c.Bind(client, server) }

// write records octets sent by the client (fromClient) or the server:
// mpa.Config.Trace for a dialing client.
func (t *tcpRecording) write(fromClient bool, b []byte) { t.c.Trace(fromClient, b) }

// close writes the connection's FINs.
func (t *tcpRecording) close() { t.c.Close() }

// discard forgets a connection that never started.
func (t *tcpRecording) discard() { t.c.Discard() }
