//go:build !js

package iwarp_test

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap/rdmaptest"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// A tcp:// request that the application does not Accept is rejected when
// its MPA handshake time runs out (an MPA Reply with the Reject bit,
// reported as mpa.ErrBacklog), the one the Listener holds for Accept as
// well as those still queued in the MPA Listener.
func TestListenerTCPRequestExpiresWithoutAccept(t *testing.T) {
	const (
		hs = 300 * time.Millisecond
		n  = 2
	)
	var refused atomic.Int32
	cfg := &iwarp.Config{MPA: &mpa.Config{HandshakeTimeout: hs, Refused: func(_ net.Addr, why error) {
		if errors.Is(why, mpa.ErrBacklog) {
			refused.Add(1)
		}
	}}}
	l, err := iwarp.Listen(ctxT(t), "tcp://127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var dials []func() error
	for range n {
		cli := newSide(t)
		dials = append(dials, func() error {
			c, err := mpa.Dial(ctxT(t), "tcp", l.Addr().String(), cli.qp, &mpa.Config{HandshakeTimeout: 5 * time.Second})
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	// Two handshake timeouts from the TCP connection (one for the
	// Request, one for the application), and slack.
	rdmaptest.ExpectRejected(t, 2*hs+700*time.Millisecond, dials)
	if got := refused.Load(); got != n {
		t.Fatalf("%d refusals reported, want %d", got, n)
	}
}

// An sctp:// session request that the application does not Accept is
// answered with a DDP Stream Session Terminate when its AcceptTimeout runs
// out, though the Listener has taken it from the SessionAcceptor.
func TestListenerSCTPRequestExpiresWithoutAccept(t *testing.T) {
	const wait = 300 * time.Millisecond
	var refused atomic.Int32
	scfg := psk()
	scfg.AcceptTimeout = wait
	scfg.Refused = func(_ net.Addr, why error) {
		if errors.Is(why, sctpddp.ErrAcceptTimeout) {
			refused.Add(1)
		}
	}
	ctx := ctxT(t)
	l, err := iwarp.Listen(ctx, "sctp://127.0.0.1:0", &iwarp.Config{SCTP: scfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := sctpddp.Dial(ctx, "udp", l.Addr().String(), psk())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	st, err := a.OpenStream(1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, ppid, err := st.ReadMessage(ctx, buf)
	took := time.Since(start)
	if err != nil || ppid != wire.PPIDSessionControl {
		t.Fatalf("no answer after %v: %v, %v", took, ppid, err)
	}
	if m, _, err := wire.ParseSessionControl(buf[:n]); err != nil || m.Function != wire.FunctionTerminate {
		t.Fatalf("answer %v, %v", m.Function, err)
	}
	if within := 2*wait + time.Second; took > within {
		t.Fatalf("answered after %v, want within %v", took, within)
	}
	if got := refused.Load(); got != 1 {
		t.Fatalf("%d refusals reported, want 1", got)
	}
}
