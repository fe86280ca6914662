package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/iwarpgo/iwarp/bench/impair"
)

// relaySpec is what a relay helper is to do: put a UDP impairment proxy
// in front of each UDP target and a delaying TCP relay in front of each
// TCP target.
type relaySpec struct {
	UDP    []string      `json:"udp"`
	TCP    []string      `json:"tcp"`
	Config impair.Config `json:"config"`
	// TCPDelay is the delay each way of the TCP relays.
	TCPDelay time.Duration `json:"tcp_delay"`
}

// relayFronts maps each target to the address that reaches it through
// the relay.
type relayFronts map[string]string

// relay runs the proxies of spec (JSON) and prints their addresses as
// the first line of output, until done closes; then it prints what the
// UDP proxies did to standard error.
func relay(spec string, done <-chan struct{}) error {
	var rs relaySpec
	if err := json.Unmarshal([]byte(spec), &rs); err != nil {
		return err
	}
	fronts := relayFronts{}
	var proxies []*impair.Proxy
	var relays []*impair.TCPRelay
	for _, t := range rs.UDP {
		p, err := impair.Listen("127.0.0.1:0", t, rs.Config)
		if err != nil {
			return err
		}
		proxies = append(proxies, p)
		fronts[t] = p.Addr().String()
	}
	for _, t := range rs.TCP {
		r, err := impair.ListenTCP("127.0.0.1:0", t, rs.TCPDelay)
		if err != nil {
			return err
		}
		relays = append(relays, r)
		fronts[t] = r.Addr().String()
	}
	b, _ := json.Marshal(fronts)
	fmt.Fprintf(os.Stdout, "%s\n", b)
	<-done
	var up, down impair.Stats
	for _, p := range proxies {
		u, d := p.Stats()
		up.Forwarded += u.Forwarded
		up.Lost += u.Lost
		up.Duplicated += u.Duplicated
		up.Outage += u.Outage
		up.Overflow += u.Overflow
		down.Forwarded += d.Forwarded
		down.Lost += d.Lost
		down.Duplicated += d.Duplicated
		down.Outage += d.Outage
		down.Overflow += d.Overflow
		p.Close()
	}
	for _, r := range relays {
		r.Close()
	}
	fmt.Fprintf(os.Stderr, "llpbench relay: datagrams up %+v, down %+v\n", up, down)
	return nil
}
