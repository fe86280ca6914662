package sctp_test

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
)

// The handshake between the two sides of this package, in memory.
func Example_handshake() {
	keys, err := sctp.NewCookieKeys(rand.Reader)
	if err != nil {
		panic(err)
	}
	client := sctp.HandshakeConfig{LocalPort: 5000, PeerPort: 5000, ARwnd: 1 << 20, OutboundStreams: 64, InboundStreams: 64}
	server := sctp.HandshakeConfig{LocalPort: 5000, ARwnd: 1 << 20, OutboundStreams: 16, InboundStreams: 16}
	buf := make([]byte, 0, 1500)

	w, err := sctp.NewCookieWait(&client, rand.Reader)
	if err != nil {
		panic(err)
	}
	init := w.AppendInit(nil)

	res, err := sctp.HandleInit(buf, init, &server, &keys, rand.Reader, time.Now())
	if err != nil {
		panic(err)
	}
	echo, e, err := w.HandleInitAck(nil, res.Packet)
	if err != nil {
		panic(err)
	}
	ack, passive, err := sctp.HandleCookieEcho(buf, echo, &keys, time.Now())
	if err != nil {
		panic(err)
	}
	active, err := e.HandleCookieAck(ack)
	if err != nil {
		panic(err)
	}
	fmt.Println(active.LocalVerificationTag == passive.PeerVerificationTag, active.OutboundStreams, passive.OutboundStreams, active.PeerAdaptation)
	// Output: true 16 16 DDP
}
