//go:build linux

package batchconn

import (
	"encoding/binary"
	"net"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the Linux system interface: the mmsghdr layout, the
// recvmmsg and sendmmsg calls, socket addresses in their raw form, the
// UDP_SEGMENT and UDP_GRO control messages and the socket options that
// turn GSO and GRO on.

// mmsghdr is struct mmsghdr of <sys/socket.h>: one message of recvmmsg
// or sendmmsg and the count of octets the kernel moved for it. Go pads
// the struct as C does on every Linux architecture.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// recvmmsg receives up to len(msgs) datagrams without blocking (the
// socket is non-blocking, as every socket of package net is).
func recvmmsg(fd uintptr, msgs []mmsghdr) (int, syscall.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd,
		uintptr(unsafe.Pointer(unsafe.SliceData(msgs))), uintptr(len(msgs)), 0, 0, 0)
	return int(n), errno
}

// sendmmsg sends up to len(msgs) messages. A result short of len(msgs)
// means the message after the last one sent failed or would block; the
// kernel reports that error only to a call that starts with it.
func sendmmsg(fd uintptr, msgs []mmsghdr) (int, syscall.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
		uintptr(unsafe.Pointer(unsafe.SliceData(msgs))), uintptr(len(msgs)), 0, 0, 0)
	return int(n), errno
}

// sendmmsgCall is the sendmmsg the Conn calls; tests replace it to
// inject the kernel's refusals.
var sendmmsgCall = sendmmsg

// sockaddr holds a struct sockaddr_in or sockaddr_in6; the former uses
// the first unix.SizeofSockaddrInet4 octets and leaves the rest zero, so
// that two sockaddrs compare equal with == exactly when they name the
// same address.
type sockaddr = unix.RawSockaddrInet6

// sockaddrLen is the length the kernel expects for sa.
func sockaddrLen(sa *sockaddr) uint32 {
	if sa.Family == unix.AF_INET {
		return unix.SizeofSockaddrInet4
	}
	return unix.SizeofSockaddrInet6
}

// addrKey identifies a source address as the kernel gave it, without
// building a net.UDPAddr.
type addrKey struct {
	ip    [16]byte
	port  uint16
	scope uint32
	v4    bool
}

// keyOf decodes the raw source address sa; ok is false for a family
// other than AF_INET and AF_INET6.
func keyOf(sa *sockaddr) (k addrKey, ok bool) {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		copy(k.ip[:4], sa4.Addr[:])
		k.port = binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		k.v4 = true
		return k, true
	case unix.AF_INET6:
		k.ip = sa.Addr
		k.port = binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		k.scope = sa.Scope_id
		return k, true
	}
	return k, false
}

// udpAddr builds the address ReadFrom returns for k, in the form package
// net gives: a 4-octet IP from an AF_INET socket, a 16-octet one from an
// AF_INET6 socket, and the zone as an interface name where it has one.
func (k addrKey) udpAddr() *net.UDPAddr {
	a := &net.UDPAddr{Port: int(k.port)}
	if k.v4 {
		a.IP = net.IP(append([]byte(nil), k.ip[:4]...))
		return a
	}
	a.IP = net.IP(append([]byte(nil), k.ip[:]...))
	if k.scope != 0 {
		if ifi, err := net.InterfaceByIndex(int(k.scope)); err == nil {
			a.Zone = ifi.Name
		} else {
			a.Zone = strconv.FormatUint(uint64(k.scope), 10)
		}
	}
	return a
}

// encodeSockaddr writes a's address into sa for a socket of family
// (AF_INET or AF_INET6): an IPv4 address becomes IPv4-mapped on an IPv6
// socket, as package net does. A nil IP is the unspecified address.
func encodeSockaddr(sa *sockaddr, family int, a *net.UDPAddr) error {
	*sa = sockaddr{}
	if a.Port < 0 || a.Port > 0xffff {
		return &net.AddrError{Err: "invalid port", Addr: a.String()}
	}
	switch family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], uint16(a.Port))
		if len(a.IP) == 0 {
			return nil
		}
		ip4 := a.IP.To4()
		if ip4 == nil {
			return &net.AddrError{Err: "non-IPv4 address", Addr: a.IP.String()}
		}
		copy(sa4.Addr[:], ip4)
		return nil
	default:
		sa.Family = unix.AF_INET6
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(a.Port))
		if len(a.IP) == 0 {
			return nil
		}
		ip16 := a.IP.To16()
		if ip16 == nil {
			return &net.AddrError{Err: "invalid IP address", Addr: a.IP.String()}
		}
		copy(sa.Addr[:], ip16)
		if a.Zone != "" {
			sa.Scope_id = zoneIndex(a.Zone)
		}
		return nil
	}
}

// zoneIndex returns the interface index of an IPv6 zone, a name or a
// number.
func zoneIndex(zone string) uint32 {
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	n, err := strconv.ParseUint(zone, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// Control messages. UDP_SEGMENT carries a uint16, the segment size of a
// GSO send; UDP_GRO an int, the segment size of a coalesced receive.
var (
	gsoCmsgSpace = unix.CmsgSpace(2)
	groCmsgSpace = unix.CmsgSpace(4)
)

// putSegmentCmsg writes a UDP_SEGMENT control message for segments of
// size octets into b, which holds gsoCmsgSpace octets.
func putSegmentCmsg(b []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
}

// groSegment returns the segment size of a UDP_GRO control message in
// the control data b, or 0 if there is none.
func groSegment(b []byte) int {
	hlen := unix.CmsgLen(0)
	for len(b) >= hlen {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		l := int(h.Len)
		if l < hlen || l > len(b) {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && l >= hlen+4 {
			return int(binary.NativeEndian.Uint32(b[hlen:]))
		}
		s := unix.CmsgSpace(l - hlen)
		if s > len(b) {
			return 0
		}
		b = b[s:]
	}
	return 0
}

// socketFamily returns the socket's address family.
func socketFamily(rc syscall.RawConn) (int, error) {
	var family int
	var serr error
	err := rc.Control(func(fd uintptr) {
		family, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	})
	if err == nil {
		err = serr
	}
	return family, err
}

// gsoSupported reports whether the kernel knows UDP_SEGMENT (Linux 4.18
// and later). Sends may still fail on a route whose device cannot
// checksum for the kernel; the conn turns GSO off then.
func gsoSupported(rc syscall.RawConn) bool {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	}); err != nil {
		return false
	}
	return serr == nil
}

// enableGRO asks the kernel to deliver coalesced datagrams whole, each
// with a UDP_GRO control message (Linux 5.0 and later). It reports
// whether the kernel accepted.
func enableGRO(rc syscall.RawConn) bool {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err != nil {
		return false
	}
	return serr == nil
}
