// Package netpeer says what the listeners' per-peer limits count as one
// peer: an IPv4 address, or an IPv6 address's /64 prefix, since one host
// may hold every address of its /64 and would otherwise count as 2^64
// peers.
package netpeer

import (
	"net"
	"net/netip"
)

// Of returns the peer of ip (IPv4-mapped IPv6 addresses count as IPv4).
func Of(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// OfAddr returns the peer of a TCP or UDP address (the zero Addr for an
// address without an IP).
func OfAddr(a net.Addr) netip.Addr {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return Of(ip)
}

// OfHostPort returns, as a string, the peer of a "host:port" (or of a
// bare IP address): its IPv4 address or IPv6 /64; a host that is no IP
// address (a name, a pipe) stands for itself.
func OfHostPort(s string) string {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Of(ap.Addr()).String()
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		return Of(ip).String()
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}
