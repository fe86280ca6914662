//go:build !js

package iwarp_test

import (
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// A Listener that closes answers an sctp:// request the application never
// saw with a DDP Stream Session Terminate, not a Reject: "A DDP Stream
// Session Reject message MUST NOT be sent unless the rejection is at the
// direction of the ULP." (RFC 5043 §6.3; §6.4 answers the requests the
// ULP does not decide with a Terminate.)
func TestListenerCloseTerminatesSCTPRequest(t *testing.T) {
	ctx := ctxT(t)
	l, err := iwarp.Listen(ctx, "sctp://127.0.0.1:0", &iwarp.Config{SCTP: psk()})
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
	if _, err := st.WriteSessionControl(ctx, wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}); err != nil {
		t.Fatal(err)
	}
	// Once the Initiate is acknowledged, the Listener has the request a
	// moment later; nobody calls Accept.
	waitfor.True(t, 5*time.Second, func() bool { return st.BufferedAmount() == 0 }, "the Initiate was not acknowledged")
	time.Sleep(200 * time.Millisecond)
	l.Close()
	buf := make([]byte, 2048)
	n, ppid, err := st.ReadMessage(ctx, buf)
	if err != nil || ppid != wire.PPIDSessionControl {
		t.Fatalf("no answer: %v, %v", ppid, err)
	}
	if m, _, err := wire.ParseSessionControl(buf[:n]); err != nil || m.Function != wire.FunctionTerminate || m.SSN != 0 {
		t.Fatalf("answer %v with DDP-SSN %d, %v", m.Function, m.SSN, err)
	}
}
