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
