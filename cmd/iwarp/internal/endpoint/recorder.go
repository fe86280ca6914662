package endpoint

import (
	"net"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/mpa"
)

// Recorder writes a --pcap capture (capture.Recorder) for endpoints of
// one scheme. A nil *Recorder records nothing.
type Recorder struct{ c *capture.Recorder }

// NewRecorder creates the capture file for endpoints of scheme.
func NewRecorder(path, scheme string) (*Recorder, error) {
	t := capture.TCP
	if scheme == "sctp" {
		t = capture.SCTP
	}
	c, err := capture.NewRecorder(path, t)
	if err != nil {
		return nil, err
	}
	return &Recorder{c}, nil
}

// SetLocal sets the address of this end in SCTP packets.
func (r *Recorder) SetLocal(a net.Addr) {
	if r != nil {
		r.c.SetLocal(a)
	}
}

// Close closes the file, returning the recording's first error.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	return r.c.Close()
}

// MPATrace is mpa.Config.Trace for this end of each connection
// (capture.Recorder.MPATrace).
func (r *Recorder) MPATrace(server bool) func(local, remote net.Addr) mpa.Tracer {
	return r.c.MPATrace(server)
}

// sctpTrace is sctpddp.Config.Trace.
func (r *Recorder) sctpTrace(peer net.Addr, outbound bool, packet []byte) {
	r.c.SCTPTrace(peer, outbound, packet)
}
