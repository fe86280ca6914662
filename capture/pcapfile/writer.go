package pcapfile

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"time"
)

// Writer writes a pcap file (nanosecond timestamps, little-endian).
type Writer struct {
	w   io.Writer
	lt  LinkType
	hdr [16]byte
}

// recordWriter takes a packet's record whole: File's buffer.
type recordWriter interface {
	writeRecord(hdr, data []byte) error
}

// NewWriter writes the pcap file header for link type lt to w.
func NewWriter(w io.Writer, lt LinkType) (*Writer, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:4], pcapMagicNano)
	binary.LittleEndian.PutUint16(h[4:6], 2)
	binary.LittleEndian.PutUint16(h[6:8], 4)
	binary.LittleEndian.PutUint32(h[16:20], MaxPacket) // snaplen
	binary.LittleEndian.PutUint32(h[20:24], uint32(lt))
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, lt: lt}, nil
}

// LinkType returns the link type of the file's packets.
func (w *Writer) LinkType() LinkType { return w.lt }

// WritePacket writes one packet captured at t.
func (w *Writer) WritePacket(t time.Time, data []byte) error {
	if len(data) > MaxPacket {
		return errors.New("pcapfile: packet longer than the snapshot length")
	}
	ns := t.UnixNano()
	binary.LittleEndian.PutUint32(w.hdr[0:4], uint32(ns/1e9))
	binary.LittleEndian.PutUint32(w.hdr[4:8], uint32(ns%1e9))
	binary.LittleEndian.PutUint32(w.hdr[8:12], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.hdr[12:16], uint32(len(data)))
	if rw, ok := w.w.(recordWriter); ok {
		return rw.writeRecord(w.hdr[:], data)
	}
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}

// AppendIPHeader appends to b the header of an IPv4 or IPv6 packet (as
// src is) from src to dst of protocol proto whose payload, which follows,
// is n octets: no options or extension headers, TTL or hop limit 64,
// IPv4's Don't Fragment set, identification id and the header checksum.
func AppendIPHeader(b []byte, src, dst netip.Addr, proto uint8, id uint16, n int) []byte {
	if src.Is4() {
		ip := len(b)
		b = append(b, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(20+n))
		b = binary.BigEndian.AppendUint16(b, id)
		b = append(b, 0x40, 0, 64, proto, 0, 0) // DF, TTL 64
		s, d := src.As4(), dst.As4()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
		binary.BigEndian.PutUint16(b[ip+10:], ^uint16(checksum(0, b[ip:ip+20])))
		return b
	}
	b = append(b, 0x60, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, proto, 64)
	s, d := src.As16(), dst.As16()
	b = append(b, s[:]...)
	return append(b, d[:]...)
}

// DefaultMSS is the segment size ConnWriter uses unless told otherwise.
const DefaultMSS = 1460

// ConnWriter synthesizes the Ethernet/IP/TCP packets of one TCP connection
// carrying given byte streams, and writes them to an Ethernet pcap Writer,
// so that tools like tshark can dissect a recorded session: a three-way
// handshake, data in segments of at most MSS octets each acknowledged by
// the peer, and FINs. Checksums are correct. IPv4 and IPv6 both work; the
// two ends must be of the same family.
type ConnWriter struct {
	w      *Writer
	ends   [2]netip.AddrPort // client, server
	macs   [2][6]byte
	seq    [2]uint32 // next sequence number each end sends
	MSS    int
	ipID   uint16
	opened bool
	buf    []byte
}

// NewConnWriter returns a ConnWriter for a connection from client to
// server. w must have link type LinkEthernet.
func NewConnWriter(w *Writer, client, server netip.AddrPort) (*ConnWriter, error) {
	if w.lt != LinkEthernet {
		return nil, errors.New("pcapfile: ConnWriter needs an Ethernet pcap Writer")
	}
	if client.Addr().Is4() != server.Addr().Is4() {
		return nil, errors.New("pcapfile: client and server of different address families")
	}
	c := &ConnWriter{w: w, ends: [2]netip.AddrPort{client, server}, MSS: DefaultMSS}
	c.macs[0] = [6]byte{0x02, 0, 0, 0, 0, 0x01} // locally administered
	c.macs[1] = [6]byte{0x02, 0, 0, 0, 0, 0x02}
	c.seq = [2]uint32{0x10000000, 0x20000000}
	return c, nil
}

func side(fromClient bool) int {
	if fromClient {
		return 0
	}
	return 1
}

// Open writes the three-way handshake.
func (c *ConnWriter) Open(t time.Time) error {
	if err := c.packet(t, 0, FlagSYN, nil); err != nil {
		return err
	}
	c.seq[0]++
	if err := c.packet(t, 1, FlagSYN|FlagACK, nil); err != nil {
		return err
	}
	c.seq[1]++
	c.opened = true
	return c.packet(t, 0, FlagACK, nil)
}

// Write writes data sent by the client (fromClient) or the server as
// segments of at most MSS octets, each followed by the peer's ACK.
func (c *ConnWriter) Write(t time.Time, fromClient bool, data []byte) error {
	if !c.opened {
		return errors.New("pcapfile: ConnWriter.Write before Open")
	}
	s := side(fromClient)
	mss := max(c.MSS, 1)
	for len(data) > 0 {
		n := min(len(data), mss)
		flags := FlagACK
		if n == len(data) {
			flags |= FlagPSH
		}
		if err := c.packet(t, s, flags, data[:n]); err != nil {
			return err
		}
		c.seq[s] += uint32(n)
		if err := c.packet(t, 1-s, FlagACK, nil); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// Close writes a FIN from each end and the last ACK.
func (c *ConnWriter) Close(t time.Time) error {
	for s := range 2 {
		if err := c.packet(t, s, FlagFIN|FlagACK, nil); err != nil {
			return err
		}
		c.seq[s]++
	}
	return c.packet(t, 0, FlagACK, nil)
}

// packet writes one segment from end s.
func (c *ConnWriter) packet(t time.Time, s int, flags uint8, payload []byte) error {
	src, dst := c.ends[s], c.ends[1-s]
	var opts []byte
	if flags&FlagSYN != 0 {
		opts = []byte{2, 4, byte(c.MSS >> 8), byte(c.MSS)} // MSS option
	}
	tcpLen := 20 + len(opts) + len(payload)
	b := c.buf[:0]
	b = append(b, c.macs[1-s][:]...)
	b = append(b, c.macs[s][:]...)
	if src.Addr().Is4() {
		b = binary.BigEndian.AppendUint16(b, etherIPv4)
		c.ipID++
	} else {
		b = binary.BigEndian.AppendUint16(b, etherIPv6)
	}
	b = AppendIPHeader(b, src.Addr(), dst.Addr(), ProtoTCP, c.ipID, tcpLen)
	th := len(b)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint32(b, c.seq[s])
	var ack uint32
	if flags&FlagACK != 0 {
		ack = c.seq[1-s]
	}
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, byte((20+len(opts))/4)<<4, flags)
	b = binary.BigEndian.AppendUint16(b, 65535) // window
	b = append(b, 0, 0, 0, 0)                   // checksum, urgent pointer
	b = append(b, opts...)
	b = append(b, payload...)
	// The pseudo-header: addresses, protocol and TCP length.
	var sum uint32
	if src.Addr().Is4() {
		a4, d4 := src.Addr().As4(), dst.Addr().As4()
		sum = checksum(sum, a4[:])
		sum = checksum(sum, d4[:])
	} else {
		a16, d16 := src.Addr().As16(), dst.Addr().As16()
		sum = checksum(sum, a16[:])
		sum = checksum(sum, d16[:])
	}
	sum += uint32(ProtoTCP) + uint32(tcpLen)
	binary.BigEndian.PutUint16(b[th+16:], ^uint16(checksum(sum, b[th:])))
	c.buf = b
	return c.w.WritePacket(t, b)
}

// checksum adds b to the Internet checksum sum (RFC 1071) and returns the
// folded 16-bit result (not yet complemented) as a uint32.
func checksum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return sum
}
