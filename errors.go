//go:build !js

package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// MaxPrivateData is the most private data a Config or an Accept carries:
// the 512 octets of MPA's Private Data (RFC 5044 §7.1.1) and of DDP over
// SCTP's (RFC 5043 §5.2.3; RFC 6581 §7: "including enhanced RDMA
// connection establishment data"), less those 4 octets of IRD and ORD
// (RFC 6581 §9) that precede the application's.
const MaxPrivateData = 512 - ddp.EnhancedDataLen

// Why a connection failed or ended, for errors.Is. Each error the package
// returns wraps one of these (or a context's error, passed through), and
// reads as one line naming the cause.
var (
	// ErrBadAddress: the URL is not tcp://host:port or sctp://host:port.
	ErrBadAddress = errors.New("iwarp: bad address")
	// ErrConfig: the Config, the private data or the queue pair cannot
	// work; found before any packet is sent.
	ErrConfig = errors.New("iwarp: bad configuration")
	// ErrUnreachable: nobody answers at the address (the TCP connection
	// is refused or times out; an ICMP port unreachable or no DTLS
	// answer comes back).
	ErrUnreachable = errors.New("iwarp: nobody answers")
	// ErrRejected: the peer's application rejected the connection;
	// errors.As finds the *ddp.RejectedError with its private data.
	ErrRejected = errors.New("iwarp: the peer rejected the connection")
	// ErrHandshake: the peer answered, but the set-up failed (a wrong
	// key or certificate, a protocol error, a peer that stopped
	// answering).
	ErrHandshake = errors.New("iwarp: the connection's set-up failed")
	// ErrClosed: the connection, the queue pair or the Listener was
	// closed by this end. It matches net.ErrClosed too.
	ErrClosed error = closedError{}
	// ErrPeerDead: an sctp:// stream ended because nothing came from the
	// peer for the dead-peer time (sctpddp.Config.DeadPeerTimeout).
	ErrPeerDead = errors.New("iwarp: peer dead")
)

type closedError struct{}

func (closedError) Error() string        { return "iwarp: closed" }
func (closedError) Is(target error) bool { return target == net.ErrClosed }

// tagged is an error of the package: it reads as msg, and wraps the
// sentinels in is and the error it stems from.
type tagged struct {
	msg string
	is  []error
	err error
}

func (e *tagged) Error() string { return e.msg }
func (e *tagged) Unwrap() []error {
	if e.err == nil {
		return e.is
	}
	return append(e.is[:len(e.is):len(e.is)], e.err)
}

func tag(err error, msg string, is ...error) error { return &tagged{msg: msg, is: is, err: err} }

// configErr reports a configuration error.
func configErr(format string, args ...any) error {
	return tag(nil, "iwarp: "+fmt.Sprintf(format, args...), ErrConfig)
}

// checkPrivateData refuses private data above MaxPrivateData.
func checkPrivateData(pd []byte) error {
	if len(pd) > MaxPrivateData {
		return configErr("%d octets of private data: at most %d (RFC 5044 §7.1.1's 512, less RFC 6581's 4 octets of IRD and ORD)", len(pd), MaxPrivateData)
	}
	return nil
}

// checkIdle refuses a queue pair that cannot start.
func checkIdle(qp *rdmap.QueuePair) error {
	switch st := qp.State(); st {
	case rdmap.StateIdle:
		return nil
	case rdmap.StateClosed:
		return tag(nil, "iwarp: the queue pair is closed: make a new one for each connection", ErrClosed)
	default:
		return configErr("the queue pair is %v, not IDLE: make a new one for each connection", st)
	}
}

// classify wraps a transport's set-up error in the package's own. The
// caller's cancelled or expired context is passed through as itself.
func classify(ctx context.Context, u string, err error) error {
	var re *ddp.RejectedError
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return tag(err, fmt.Sprintf("iwarp: bad address %q: no such host", u), ErrBadAddress)
	case errors.As(err, &dns):
		return tag(err, fmt.Sprintf("iwarp: cannot resolve %s: %v", u, err), ErrUnreachable)
	case errors.As(err, &re):
		return tag(err, fmt.Sprintf("iwarp: %s rejected the connection: %v", u, err), ErrRejected)
	case errors.Is(err, sctpddp.ErrConfig):
		return tag(err, fmt.Sprintf("iwarp: %s: %v", u, err), ErrConfig)
	case errors.Is(err, syscall.ECONNREFUSED):
		return tag(err, fmt.Sprintf("iwarp: nothing listens at %s: start the server, or check the port (%v)", u, err), ErrUnreachable)
	case errors.Is(err, sctpddp.ErrUnreachable):
		return tag(err, fmt.Sprintf("iwarp: nobody answers at %s: %v", u, err), ErrUnreachable)
	case ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded):
		return tag(err, fmt.Sprintf("iwarp: %s: %v", u, ctx.Err()), context.Cause(ctx))
	case ctx.Err() != nil:
		return tag(err, fmt.Sprintf("iwarp: %s answered, but the set-up did not complete in time: %v", u, err), ErrHandshake, ctx.Err())
	}
	return tag(err, fmt.Sprintf("iwarp: set-up with %s failed: %v", u, err), ErrHandshake)
}

// endError says in the package's words how c's stream ended: err is the
// queue pair's, closed whether this end closed it.
func (c *Conn) endError(err error, closed bool) error {
	switch {
	case err == nil:
		return nil
	case closed:
		return tag(err, "iwarp: the connection was closed here", ErrClosed)
	case errors.Is(err, sctpddp.ErrPeerDead):
		return tag(err, fmt.Sprintf("iwarp: peer dead: nothing from %v for %v (sctpddp.Config.DeadPeerTimeout): %s", c.remote, c.deadPeerTimeout(), deepest(err, sctpddp.ErrPeerDead)), ErrPeerDead)
	case errors.Is(err, rdmap.ErrDisconnected) && errors.Is(err, sctpddp.ErrSessionTerminated):
		// "At least one side MUST send a DDP Stream Terminate." (RFC
		// 5043 §6.2): the orderly end of a session.
		return tag(err, "iwarp: the peer disconnected (its DDP Stream Session Terminate closed the session in order)", rdmap.ErrDisconnected)
	}
	return err
}

// deadPeerTimeout is the silence after which an sctp:// stream ends.
func (c *Conn) deadPeerTimeout() time.Duration {
	if c.cfg.SCTP != nil && c.cfg.SCTP.DeadPeerTimeout > 0 {
		return c.cfg.SCTP.DeadPeerTimeout
	}
	return sctpddp.DefaultDeadPeerTimeout
}

// deepest returns the text of the innermost error of err's chain that
// wraps target: the one that says most precisely what happened.
func deepest(err, target error) string {
	msg := err.Error()
	for e := err; e != nil; {
		if e == target {
			break
		}
		if errors.Is(e, target) {
			msg = e.Error()
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			next := error(nil)
			for _, x := range u.Unwrap() {
				if errors.Is(x, target) {
					next = x
					break
				}
			}
			e = next
		default:
			e = nil
		}
	}
	return msg
}
