//go:build !js

package sctpddp

import (
	"errors"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/sctpddp/sctp"
)

// Config.PionSCTP on both ends runs the same RFC 5043 session over
// pion/sctp's association that the rest of the tests run over package
// sctp's.
func TestPionSCTPOnBothEnds(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	srv.PionSCTP, cli.PionSCTP = true, true
	server, client := connect(t, srv, cli)
	if _, ok := server.sctp.(pionAssociation); !ok {
		t.Fatalf("server runs %T", server.sctp)
	}
	if _, ok := client.sctp.(pionAssociation); !ok {
		t.Fatalf("client runs %T", client.sctp)
	}
	exchange(t, server, client, 3)
}

// By default an association runs on package sctp's, whose peer announced
// DDP's Adaptation Layer Indication (RFC 5043 §11.1).
func TestOwnSCTPByDefault(t *testing.T) {
	checkGoroutines(t)
	srv, cli := pinnedConfigs(t)
	server, client := connect(t, srv, cli)
	for _, a := range []*Association{server, client} {
		o, ok := a.sctp.(ownAssociation)
		if !ok {
			t.Fatalf("runs %T", a.sctp)
		}
		est := o.a.Established()
		if !est.PeerAdaptation.DDP() {
			t.Fatalf("peer's Adaptation Layer Indication: %v", est.PeerAdaptation)
		}
		if !est.SendZeroChecksum || !est.ReceiveZeroChecksum {
			t.Fatal("zero checksum over DTLS not agreed")
		}
	}
	exchange(t, server, client, 5)
}

// A peer on pion/sctp sends no Adaptation Layer Indication: "NONE: RDMA
// and DDP procedures MUST NOT be performed upon this association" (RFC
// 5043 §11.1). Package sctp's end refuses it with an ABORT, and both ends
// fail their handshakes at once.
func TestOwnSCTPRefusesPeerWithoutIndication(t *testing.T) {
	checkGoroutines(t)
	for _, pionServer := range []bool{false, true} {
		srv, cli := pinnedConfigs(t)
		srv.PionSCTP, cli.PionSCTP = pionServer, !pionServer
		l := listenT(t, srv)
		ctx := testCtx(t)
		_, err := Dial(ctx, "udp", l.Addr().String(), cli)
		if err == nil {
			t.Fatalf("pion server %v: a peer without DDP's indication was associated", pionServer)
		}
		if pionServer && !errors.Is(err, sctp.ErrPeerAdaptation) {
			t.Fatalf("pion server %v: %v", pionServer, err)
		}
		if !pionServer && !strings.Contains(err.Error(), "SCTP handshake") {
			t.Fatalf("pion server %v: %v", pionServer, err)
		}
		t.Logf("pion server %v: %v", pionServer, err)
	}
}
