package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// Pending is a connection request waiting for its queue pair.
type Pending struct {
	Peer string // the peer's address
	req  *iwarp.Request
	l    *Listener
}

// Accept starts qp on the connection, answering with the listener's
// private data.
func (p *Pending) Accept(ctx context.Context, qp *rdmap.QueuePair) (*Conn, error) {
	return p.AcceptWith(ctx, qp, p.l.PrivateData)
}

// AcceptWith starts qp on the connection, answering with privateData.
func (p *Pending) AcceptWith(ctx context.Context, qp *rdmap.QueuePair, privateData []byte) (*Conn, error) {
	c, err := p.req.Accept(ctx, qp, privateData)
	if err != nil {
		return nil, err
	}
	info := infoOf(c, p.l.Authenticated)
	info.Peer = p.Peer
	out := &Conn{Info: info, QP: qp, C: c}
	out.watchEnd()
	return out, nil
}

// Reject refuses the connection.
func (p *Pending) Reject() { p.req.Reject(nil) }

// Listener accepts connections of either transport (package iwarp's
// Listener).
type Listener struct {
	l             *iwarp.Listener
	addr          net.Addr
	Fingerprint   string          // sctp:// with certificates
	SCTPConfig    *sctpddp.Config // sctp://: the configuration it listens with
	Authenticated bool            // sctp://: clients are authenticated
	PrivateData   []byte          // what Accept answers with
}

func (l *Listener) Addr() net.Addr { return l.addr }

// Accept returns the next connection request.
func (l *Listener) Accept(ctx context.Context) (*Pending, error) {
	req, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &Pending{Peer: req.RemoteAddr().String(), req: req, l: l}, nil
}

// Close stops listening; established connections stay open.
func (l *Listener) Close() { l.l.Close() }

// ListenRecorded listens on u and, with --pcap, records what crosses
// every connection. Warnings (unauthenticated peers) go to stderr.
func ListenRecorded(ctx context.Context, u URL, f *Flags, stderr io.Writer) (*Listener, *Recorder, error) {
	var rec *Recorder
	if f.PCAP != "" {
		var err error
		if rec, err = NewRecorder(f.PCAP, u.Scheme); err != nil {
			return nil, nil, err
		}
	}
	l, err := Listen(ctx, u, f, rec, stderr)
	if err != nil {
		rec.Close()
		return nil, nil, fmt.Errorf("cannot listen on %s: %v", u, err)
	}
	rec.SetLocal(l.Addr())
	return l, rec, nil
}

// Listen listens on u, recording its connections with a Recorder.
func Listen(ctx context.Context, u URL, f *Flags, rec *Recorder, stderr io.Writer) (*Listener, error) {
	l := &Listener{}
	cfg := &iwarp.Config{}
	if u.Scheme == "tcp" {
		cfg.MPA = f.mpaConfig()
		if f.Refused != nil {
			cfg.MPA.Refused = f.Refused
		}
		l.PrivateData = cfg.MPA.PrivateData
		if rec != nil {
			cfg.MPA.Trace = rec.MPATrace(true)
		}
	} else {
		scfg, auth, fp, err := f.SCTPConfig(u.Addr, true, rec)
		if err != nil {
			return nil, err
		}
		if !auth && !f.warnInsecure(stderr) {
			fmt.Fprintln(stderr, "iwarp: note: clients are not authenticated: they pin this listener's fingerprint, and any client is accepted (give --psk to both ends to authenticate both)")
		}
		if f.Refused != nil {
			scfg.Refused = f.Refused
		}
		cfg.SCTP, l.SCTPConfig, l.Authenticated, l.Fingerprint = scfg, scfg, auth, fp
		if f.MPA != nil {
			l.PrivateData = f.MPA.PrivateData
		}
	}
	il, err := iwarp.Listen(ctx, u.String(), cfg)
	if err != nil {
		return nil, err
	}
	l.l, l.addr = il, il.Addr()
	return l, nil
}

// Dial connects qp to the listener at u.
func Dial(ctx context.Context, u URL, f *Flags, rec *Recorder, qp *rdmap.QueuePair, stderr io.Writer) (*Conn, error) {
	cfg := &iwarp.Config{ConnectTimeout: 15 * time.Second}
	auth := true
	if u.Scheme == "tcp" {
		cfg.MPA = f.mpaConfig()
		cfg.PrivateData = cfg.MPA.PrivateData
		if rec != nil {
			cfg.MPA.Trace = rec.MPATrace(false)
		}
	} else {
		scfg, ok, _, err := f.SCTPConfig(u.Addr, false, rec)
		if err != nil {
			return nil, err
		}
		if auth = ok; !auth && !f.warnInsecure(stderr) {
			fmt.Fprintln(stderr, "iwarp: WARNING: --insecure-skip-verify: the server is not authenticated (give --fingerprint or --psk to verify it)")
		}
		cfg.SCTP = scfg
		if f.MPA != nil {
			cfg.PrivateData = f.MPA.PrivateData
		}
	}
	c, err := iwarp.Dial(ctx, u.String(), qp, cfg)
	if err != nil {
		return nil, describeDialErr(u, f, err)
	}
	out := &Conn{Info: infoOf(c, auth), QP: qp, C: c}
	out.watchEnd()
	return out, nil
}

func describeDialErr(u URL, f *Flags, err error) error {
	switch {
	case errors.Is(err, iwarp.ErrUnreachable) && errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connecting to %s: nothing listens there (connection refused): start the server, or check the port", u)
	case errors.Is(err, iwarp.ErrUnreachable):
		return fmt.Errorf("connecting to %s: nobody answers (the host drops the packets, or is not there)", u)
	case errors.Is(err, sctpddp.ErrPSKMismatch):
		return fmt.Errorf("connecting to %s: the server holds another pre-shared key: give both ends the same --psk", u)
	case errors.Is(err, sctpddp.ErrPSKIdentity):
		return fmt.Errorf("connecting to %s: the server does not know --psk-identity %q", u, f.PSKIdentity)
	case errors.Is(err, sctpddp.ErrFingerprintMismatch):
		return fmt.Errorf("connecting to %s: the server's certificate is not the --fingerprint given: %v", u, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("connecting to %s: timed out", u)
	case errors.Is(err, iwarp.ErrRejected) && u.Scheme == "tcp":
		return fmt.Errorf("connecting to %s: the server rejected the connection (MPA Reply with R=1)", u)
	case errors.Is(err, iwarp.ErrRejected):
		return fmt.Errorf("connecting to %s: the server rejected the connection", u)
	}
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return fmt.Errorf("connecting to %s: %s", u, msg)
}
