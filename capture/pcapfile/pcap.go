package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LinkType is a LINKTYPE_ value of the tcpdump.org link-layer header
// registry, as pcap and pcapng files carry it.
type LinkType uint16

// The link types this package decodes.
const (
	LinkNull     LinkType = 0   // BSD loopback: 4-octet address family, host order
	LinkEthernet LinkType = 1   // IEEE 802.3
	LinkRaw      LinkType = 101 // raw IPv4 or IPv6
	LinkLoop     LinkType = 108 // OpenBSD loopback: 4-octet address family, network order
	LinkSLL      LinkType = 113 // Linux cooked capture v1
	LinkIPv4     LinkType = 228
	LinkIPv6     LinkType = 229
	LinkUpperPDU LinkType = 252 // Wireshark's "Export PDUs to File": tags, then a PDU
	LinkSLL2     LinkType = 276 // Linux cooked capture v2
)

func (l LinkType) String() string {
	switch l {
	case LinkNull:
		return "NULL"
	case LinkEthernet:
		return "ETHERNET"
	case LinkRaw:
		return "RAW"
	case LinkLoop:
		return "LOOP"
	case LinkSLL:
		return "LINUX_SLL"
	case LinkIPv4:
		return "IPV4"
	case LinkIPv6:
		return "IPV6"
	case LinkUpperPDU:
		return "WIRESHARK_UPPER_PDU"
	case LinkSLL2:
		return "LINUX_SLL2"
	}
	return fmt.Sprintf("LinkType(%d)", uint16(l))
}

// Limits that keep a malformed file from making the reader allocate
// without bound.
const (
	// MaxPacket is the largest packet (captured length) accepted.
	MaxPacket = 256 << 10
	// maxBlock is the largest pcapng block accepted.
	maxBlock = MaxPacket + 64<<10
	// maxOrigLen is the largest original length accepted, the largest
	// that Packet.OrigLen holds on every build (int is 32 bits on some).
	maxOrigLen = 1<<31 - 1
)

// Packet is one captured packet.
type Packet struct {
	Time      time.Time
	LinkType  LinkType
	Interface int // pcapng interface index; 0 in pcap files
	// Data is the captured octets. It is valid until the next call of
	// Reader.Next.
	Data    []byte
	OrigLen int // the packet's length on the wire
}

// ErrFormat is wrapped by every error about a malformed file.
var ErrFormat = errors.New("pcapfile: malformed capture file")

func formatError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// Magic numbers.
const (
	pcapMagicMicro = 0xa1b2c3d4
	pcapMagicNano  = 0xa1b23c4d
	ngSHB          = 0x0a0d0d0a
	ngBOM          = 0x1a2b3c4d
	ngIDB          = 0x00000001
	ngPB           = 0x00000002 // obsolete Packet Block
	ngSPB          = 0x00000003
	ngEPB          = 0x00000006
)

// Reader reads packets from a pcap or pcapng file.
type Reader struct {
	r    io.Reader
	ng   bool
	bo   binary.ByteOrder
	buf  []byte
	hdr  [16]byte
	nano bool // pcap: nanosecond timestamps
	lt   LinkType
	snap uint32
	ifs  []ngInterface // pcapng: interfaces of the current section
}

type ngInterface struct {
	lt   LinkType
	snap uint32 // 0: no limit
	// if_tsresol: a tick is 10^-exp seconds, or 2^-exp when base2.
	base2 bool
	exp   uint8
}

// NewReader reads the file header of a pcap or pcapng file from r.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: r}
	var m [4]byte
	if _, err := io.ReadFull(r, m[:]); err != nil {
		return nil, formatError("reading the magic number: %v", err)
	}
	switch {
	case binary.LittleEndian.Uint32(m[:]) == ngSHB:
		rd.ng = true
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, formatError("section header block: %v", err)
		}
		if err := rd.readSHB(h[0:4], h[4:8]); err != nil {
			return nil, err
		}
		return rd, nil
	case binary.LittleEndian.Uint32(m[:]) == pcapMagicMicro:
		rd.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(m[:]) == pcapMagicMicro:
		rd.bo = binary.BigEndian
	case binary.LittleEndian.Uint32(m[:]) == pcapMagicNano:
		rd.bo, rd.nano = binary.LittleEndian, true
	case binary.BigEndian.Uint32(m[:]) == pcapMagicNano:
		rd.bo, rd.nano = binary.BigEndian, true
	default:
		return nil, formatError("unknown magic number %x", m)
	}
	var h [20]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, formatError("pcap file header: %v", err)
	}
	// version major, minor, thiszone, sigfigs, snaplen, network
	if major := rd.bo.Uint16(h[0:2]); major != 2 {
		return nil, formatError("pcap version %d", major)
	}
	rd.snap = rd.bo.Uint32(h[12:16])
	// The upper bits of the link type field hold FCS information.
	rd.lt = LinkType(rd.bo.Uint32(h[16:20]) & 0xffff)
	return rd, nil
}

// IsPcapNG reports whether the file is pcapng.
func (r *Reader) IsPcapNG() bool { return r.ng }

// Next returns the next packet, or io.EOF after the last one.
func (r *Reader) Next() (Packet, error) {
	if r.ng {
		return r.nextNG()
	}
	n, err := io.ReadFull(r.r, r.hdr[:16])
	if err == io.EOF {
		return Packet{}, io.EOF
	}
	if err != nil {
		return Packet{}, formatError("record header truncated after %d octets", n)
	}
	sec := r.bo.Uint32(r.hdr[0:4])
	frac := r.bo.Uint32(r.hdr[4:8])
	incl := r.bo.Uint32(r.hdr[8:12])
	orig := r.bo.Uint32(r.hdr[12:16])
	// Both lengths are bounded as uint32 before they become ints, which
	// are 32 bits on some builds.
	if incl > MaxPacket {
		return Packet{}, formatError("record of %d octets", incl)
	}
	if orig > maxOrigLen {
		return Packet{}, formatError("record of original length %d", orig)
	}
	data, err := r.read(int(incl))
	if err != nil {
		return Packet{}, err
	}
	ns := int64(frac)
	if !r.nano {
		ns *= 1000
	}
	return Packet{
		Time:     time.Unix(int64(sec), ns).UTC(),
		LinkType: r.lt,
		Data:     data,
		OrigLen:  int(orig),
	}, nil
}

// read reads n octets into the reused buffer.
func (r *Reader) read(n int) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, formatError("record truncated: %v", err)
	}
	return b, nil
}

func (r *Reader) nextNG() (Packet, error) {
	for {
		n, err := io.ReadFull(r.r, r.hdr[:8])
		if err == io.EOF {
			return Packet{}, io.EOF
		}
		if err != nil {
			return Packet{}, formatError("block header truncated after %d octets", n)
		}
		if binary.LittleEndian.Uint32(r.hdr[0:4]) == ngSHB {
			// A new section, perhaps with the other byte order: re-read
			// its length with the byte-order magic.
			var rest [4]byte
			if _, err := io.ReadFull(r.r, rest[:]); err != nil {
				return Packet{}, formatError("section header block: %v", err)
			}
			if err := r.readSHB(r.hdr[4:8], rest[:]); err != nil {
				return Packet{}, err
			}
			continue
		}
		typ := r.bo.Uint32(r.hdr[0:4])
		// The length is bounded as a uint32 before any arithmetic.
		total := r.bo.Uint32(r.hdr[4:8])
		if total < 12 || total%4 != 0 || total > maxBlock {
			return Packet{}, formatError("block of %d octets", total)
		}
		body, err := r.read(int(total) - 8)
		if err != nil {
			return Packet{}, err
		}
		if r.bo.Uint32(body[len(body)-4:]) != total {
			return Packet{}, formatError("block lengths disagree")
		}
		body = body[:len(body)-4]
		switch typ {
		case ngIDB:
			if err := r.readIDB(body); err != nil {
				return Packet{}, err
			}
		case ngEPB:
			return r.readEPB(body, false)
		case ngPB:
			return r.readEPB(body, true)
		case ngSPB:
			return r.readSPB(body)
		}
		// Other blocks (name resolution, statistics, ...) are skipped.
	}
}

// readSHB reads the rest of a Section Header Block after its type, given
// its length and byte-order magic fields.
func (r *Reader) readSHB(length, bom []byte) error {
	switch {
	case binary.LittleEndian.Uint32(bom) == ngBOM:
		r.bo = binary.LittleEndian
	case binary.BigEndian.Uint32(bom) == ngBOM:
		r.bo = binary.BigEndian
	default:
		return formatError("bad byte-order magic %x", bom)
	}
	total := r.bo.Uint32(length)
	if total < 28 || total%4 != 0 || total > maxBlock {
		return formatError("section header block of %d octets", total)
	}
	body, err := r.read(int(total) - 12)
	if err != nil {
		return err
	}
	if major := r.bo.Uint16(body[0:2]); major != 1 {
		return formatError("pcapng version %d", major)
	}
	if r.bo.Uint32(body[len(body)-4:]) != total {
		return formatError("section header block lengths disagree")
	}
	r.ifs = r.ifs[:0]
	return nil
}

func (r *Reader) readIDB(b []byte) error {
	if len(b) < 8 {
		return formatError("interface description block of %d octets", len(b))
	}
	ifc := ngInterface{lt: LinkType(r.bo.Uint16(b[0:2])), snap: r.bo.Uint32(b[4:8]), exp: 6}
	opts := b[8:]
	for len(opts) >= 4 {
		code := r.bo.Uint16(opts[0:2])
		l := int(r.bo.Uint16(opts[2:4]))
		if 4+l > len(opts) {
			return formatError("interface option overruns its block")
		}
		v := opts[4 : 4+l]
		if code == 0 { // opt_endofopt
			break
		}
		if code == 9 && l >= 1 { // if_tsresol
			ifc.base2 = v[0]&0x80 != 0
			ifc.exp = v[0] & 0x7f
		}
		opts = opts[min(len(opts), 4+(l+3)&^3):]
	}
	if len(r.ifs) >= 1<<16 {
		return formatError("too many interfaces")
	}
	r.ifs = append(r.ifs, ifc)
	return nil
}

// iface returns the interface id names, compared as a uint32: at most
// 1<<16 interfaces are declared, so an id that passes fits an int.
func (r *Reader) iface(id uint32) (*ngInterface, error) {
	if id >= uint32(len(r.ifs)) {
		return nil, formatError("packet on undeclared interface %d", id)
	}
	return &r.ifs[id], nil
}

// readEPB decodes an Enhanced Packet Block (or the obsolete Packet Block,
// whose interface id is 16 bits followed by a 16-bit drop count).
func (r *Reader) readEPB(b []byte, obsolete bool) (Packet, error) {
	if len(b) < 20 {
		return Packet{}, formatError("packet block of %d octets", len(b))
	}
	var id uint32
	if obsolete {
		id = uint32(r.bo.Uint16(b[0:2]))
	} else {
		id = r.bo.Uint32(b[0:4])
	}
	ifc, err := r.iface(id)
	if err != nil {
		return Packet{}, err
	}
	ts := uint64(r.bo.Uint32(b[4:8]))<<32 | uint64(r.bo.Uint32(b[8:12]))
	// Both lengths are bounded as uint32 before they become ints, which
	// are 32 bits on some builds; len(b) is at most maxBlock.
	capLen := r.bo.Uint32(b[12:16])
	orig := r.bo.Uint32(b[16:20])
	if capLen > uint32(len(b)-20) {
		return Packet{}, formatError("captured length %d overruns its block", capLen)
	}
	if orig > maxOrigLen {
		return Packet{}, formatError("original length %d", orig)
	}
	return Packet{
		Time:      ifc.time(ts),
		LinkType:  ifc.lt,
		Interface: int(id),
		Data:      b[20 : 20+int(capLen)],
		OrigLen:   int(orig),
	}, nil
}

// readSPB decodes a Simple Packet Block: interface 0, no timestamp.
func (r *Reader) readSPB(b []byte) (Packet, error) {
	if len(b) < 4 {
		return Packet{}, formatError("simple packet block of %d octets", len(b))
	}
	ifc, err := r.iface(0)
	if err != nil {
		return Packet{}, err
	}
	// The original length is bounded as a uint32 before it becomes an
	// int, which is 32 bits on some builds; the captured length is the
	// smallest of it, the block's room and the snapshot length, so it
	// lies inside b.
	orig := r.bo.Uint32(b[0:4])
	if orig > maxOrigLen {
		return Packet{}, formatError("simple packet block of original length %d", orig)
	}
	capLen := min(orig, uint32(len(b)-4))
	if ifc.snap > 0 {
		capLen = min(capLen, ifc.snap)
	}
	return Packet{LinkType: ifc.lt, Data: b[4 : 4+int(capLen)], OrigLen: int(orig)}, nil
}

// time converts a timestamp in the interface's units.
func (i *ngInterface) time(ts uint64) time.Time {
	if i.base2 {
		e := min(i.exp, 63)
		sec := ts >> e
		frac := ts & (1<<e - 1)
		ns := (frac * 1e9) >> e // frac < 2^e; exact enough for e <= 30
		if e > 30 {
			ns = uint64(float64(frac) / float64(uint64(1)<<e) * 1e9)
		}
		return time.Unix(int64(sec), int64(ns)).UTC()
	}
	e := min(i.exp, 19)
	div := uint64(1)
	for range e {
		div *= 10
	}
	sec := ts / div
	frac := ts % div
	var ns uint64
	if e <= 9 {
		mul := uint64(1)
		for range 9 - e {
			mul *= 10
		}
		ns = frac * mul
	} else {
		d := uint64(1)
		for range e - 9 {
			d *= 10
		}
		ns = frac / d
	}
	return time.Unix(int64(sec), int64(ns)).UTC()
}
