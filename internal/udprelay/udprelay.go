// Package udprelay is a test kit: a UDP relay between one client and a
// target that forwards every datagram both ways until it is cut, and then
// drops them all, as a peer that vanishes without a word does.
//
//	r := udprelay.New(t, listener.Addr().String())
//	conn := dial("sctp://" + r.Addr().String())
//	r.Cut() // the peer is gone
package udprelay

import (
	"net"
	"sync/atomic"
	"testing"
)

// Relay forwards datagrams between the last client that sent to Addr and
// the target. It closes when the test ends.
type Relay struct {
	pc      net.PacketConn
	cut     atomic.Bool
	carried atomic.Int64
}

// New starts a relay to target ("host:port") on a loopback port.
func New(t testing.TB, target string) *Relay {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Dial("udp", target)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	r := &Relay{pc: pc}
	t.Cleanup(func() { pc.Close(); up.Close() })
	var client atomic.Pointer[net.Addr]
	go func() {
		b := make([]byte, 65536)
		for {
			n, a, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			client.Store(&a)
			if !r.cut.Load() {
				up.Write(b[:n])
				r.carried.Add(1)
			}
		}
	}()
	go func() {
		b := make([]byte, 65536)
		for {
			n, err := up.Read(b)
			if err != nil {
				return
			}
			if a := client.Load(); a != nil && !r.cut.Load() {
				pc.WriteTo(b[:n], *a)
				r.carried.Add(1)
			}
		}
	}()
	return r
}

// Addr is the address clients send to.
func (r *Relay) Addr() net.Addr { return r.pc.LocalAddr() }

// Carried is the number of datagrams relayed so far, both ways: a test
// cuts the path once traffic is seen on it.
func (r *Relay) Carried() int64 { return r.carried.Load() }

// Cut drops every datagram from now on, both ways.
func (r *Relay) Cut() { r.cut.Store(true) }
