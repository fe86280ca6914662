package perftest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The control messages. Every one is a Send of its own on the control
// connection; perftest copies raw C variables and structs into its send
// buffer (src/perftest_communication.c, rdma_write_data and
// rdma_write_keys), so the lengths are the C types' sizes on x86-64.
const (
	// VersionLen is the version string's Send: user_param->version, a
	// char[MAX_VERSION] of 16 (perftest_parameters.h), strncpy'd from
	// configure's VERSION and so padded with NULs.
	VersionLen = 16
	// IntLen is the Send of one C int (check_sys_data's cycle buffer and
	// cache line size), in network byte order (hton_int).
	IntLen = 4
	// MTULen is check_mtu's Send: the active MTU's enum ibv_mtu printed
	// with "%d" into a char[4], of which sizeof(char[2]) octets go (for
	// peers of version 5.31 and later), e.g. "3\x00" for 1024.
	MTULen = 2
	// DestLen is struct pingpong_dest (perftest_resources.h) on x86-64,
	// padding included.
	DestLen = 56
	// ReportFieldLen is one field of xchg_bw_reports: an unsigned long,
	// uint64_t or double, each its own Send in network byte order.
	ReportFieldLen = 8
)

// Version is the version string this package sends: perftest 4.5-0.17
// (Debian's perftest 4.5+0.17) is configure.ac's AC_INIT version 6.06.
const Version = "6.06"

// MinPeerVersion is the oldest peer perftest accepts
// (check_version_compatibility: "not compatible with versions older than
// 5.70"); this package refuses older peers as well, since the exchanges
// below follow 5.70 and later.
const MinPeerVersion = 5.70

// Errors of the decoders. Each decoder's error wraps ErrShort when b is
// shorter than the record, ErrMalformed when its content is not valid.
var (
	ErrShort     = errors.New("perftest: record truncated")
	ErrMalformed = errors.New("perftest: malformed record")
)

// AppendVersion appends the 16-octet version Send of version v (at most
// 15 characters, as strncpy into char[16] leaves room for a NUL).
func AppendVersion(b []byte, v string) []byte {
	var f [VersionLen]byte
	copy(f[:VersionLen-1], v)
	return append(b, f[:]...)
}

// ParseVersion decodes a version Send: the characters before the first
// NUL, which must come within the 16 octets (perftest reads the field
// with atof). It must be a number such as "6.06".
func ParseVersion(b []byte) (string, float64, error) {
	if len(b) < VersionLen {
		return "", 0, fmt.Errorf("%w: version: %d octets, want %d", ErrShort, len(b), VersionLen)
	}
	s := b[:VersionLen]
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		// strncpy left no NUL: perftest's atof would read past the field.
		return "", 0, fmt.Errorf("%w: version %q has no terminating NUL", ErrMalformed, s)
	}
	s = s[:i]
	v, err := strconv.ParseFloat(string(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return "", 0, fmt.Errorf("%w: version %q is not a number", ErrMalformed, s)
	}
	return string(s), v, nil
}

// AppendInt appends a C int in network byte order (hton_int), as
// check_sys_data sends the cycle buffer and the cache line size.
func AppendInt(b []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

// ParseInt decodes a C int sent by AppendInt.
func ParseInt(b []byte) (int32, error) {
	if len(b) < IntLen {
		return 0, fmt.Errorf("%w: int: %d octets, want %d", ErrShort, len(b), IntLen)
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// AppendMTU appends check_mtu's Send for an enum ibv_mtu value (1 for 256
// octets up to 5 for 4096): its decimal digit and a NUL.
func AppendMTU(b []byte, mtu int) []byte {
	var f [MTULen]byte
	copy(f[:], strconv.Itoa(mtu))
	return append(b, f[:]...)
}

// ParseMTU decodes check_mtu's Send as perftest does (strtol of the
// characters up to a NUL or the end) and checks that it is an enum
// ibv_mtu value, 1 to 5.
func ParseMTU(b []byte) (int, error) {
	if len(b) < MTULen {
		return 0, fmt.Errorf("%w: MTU: %d octets, want %d", ErrShort, len(b), MTULen)
	}
	s := b[:MTULen]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	v, err := strconv.Atoi(string(s))
	if err != nil || v < 1 || v > 5 {
		return 0, fmt.Errorf("%w: MTU %q is not an ibv_mtu (1..5)", ErrMalformed, s)
	}
	return v, nil
}

// MTUBytes returns the octets of an enum ibv_mtu value (MTU_SIZE).
func MTUBytes(mtu int) int { return 128 << mtu }

// Dest is struct pingpong_dest, what each side says about a queue pair
// (perftest_resources.h). On x86-64 (LP64) it is 56 octets:
//
//	offset  0  int lid
//	offset  4  int out_reads
//	offset  8  int qpn
//	offset 12  int psn
//	offset 16  unsigned rkey
//	offset 20  (4 octets of padding: vaddr is 8-aligned)
//	offset 24  unsigned long long vaddr
//	offset 32  union ibv_gid gid (16 octets)
//	offset 48  unsigned srqn
//	offset 52  int gid_index
//
// rdma_write_keys (HAVE_ENDIAN, as Debian builds it) converts every
// integer to network byte order with htobe32/htobe64 into a struct on the
// stack whose padding it never clears: the 4 octets at offset 20 carry
// stack garbage on the wire (seen in captures: zeros, or 0xfe550000). The
// reader (rdma_read_keys) converts lid, out_reads, qpn, psn, rkey and
// vaddr back and copies gid; it ignores srqn and gid_index. Over iWARP
// only rkey and vaddr matter to the peer's data path (and out_reads is
// printed); lid is 0, qpn and psn are informational.
type Dest struct {
	LID      uint32
	OutReads uint32
	QPN      uint32
	PSN      uint32
	RKey     uint32
	Pad      uint32 // the padding octets as received (sent as zero)
	VAddr    uint64
	GID      [16]byte
	SRQN     uint32
	GIDIndex int32
}

// Append appends the 56-octet wire form of d; the padding is sent as
// zero, whatever d.Pad says.
func (d *Dest) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, d.LID)
	b = binary.BigEndian.AppendUint32(b, d.OutReads)
	b = binary.BigEndian.AppendUint32(b, d.QPN)
	b = binary.BigEndian.AppendUint32(b, d.PSN)
	b = binary.BigEndian.AppendUint32(b, d.RKey)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, d.VAddr)
	b = append(b, d.GID[:]...)
	b = binary.BigEndian.AppendUint32(b, d.SRQN)
	return binary.BigEndian.AppendUint32(b, uint32(d.GIDIndex))
}

// ParseDest decodes a pingpong_dest record. Every field is taken as sent
// (perftest's reader ignores srqn and gid_index; they are returned all
// the same), Pad included.
func ParseDest(b []byte) (Dest, error) {
	if len(b) < DestLen {
		return Dest{}, fmt.Errorf("%w: pingpong_dest: %d octets, want %d", ErrShort, len(b), DestLen)
	}
	d := Dest{
		LID:      binary.BigEndian.Uint32(b[0:]),
		OutReads: binary.BigEndian.Uint32(b[4:]),
		QPN:      binary.BigEndian.Uint32(b[8:]),
		PSN:      binary.BigEndian.Uint32(b[12:]),
		RKey:     binary.BigEndian.Uint32(b[16:]),
		Pad:      binary.BigEndian.Uint32(b[20:]),
		VAddr:    binary.BigEndian.Uint64(b[24:]),
		SRQN:     binary.BigEndian.Uint32(b[48:]),
		GIDIndex: int32(binary.BigEndian.Uint32(b[52:])),
	}
	copy(d.GID[:], b[32:48])
	return d, nil
}

// BWReport is struct bw_report_data as xchg_bw_reports exchanges it over
// rdma_cm: five Sends of 8 octets, in this order, each in network byte
// order (hton_long, hton_64 for iters with peers of version 5.33 and
// later, and the doubles' IEEE 754 bits byte-swapped by hton_double).
// The per-port fields go only with --report-per-port, which this package
// does not use. A perftest server of a unidirectional test sends its own
// bw_report_data uninitialized (stack garbage, seen in captures); the
// client's is the one that matters.
type BWReport struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64 // MB/s, MB = 2^20 octets
	BWAvg   float64
	MsgRate float64 // Mpps
}

// ReportFields is the number of Sends of a BWReport.
const ReportFields = 5

// Fields returns the five Sends of r.
func (r *BWReport) Fields() [ReportFields][]byte {
	var f [ReportFields][]byte
	for i, v := range []uint64{r.Size, r.Iters, math.Float64bits(r.BWPeak), math.Float64bits(r.BWAvg), math.Float64bits(r.MsgRate)} {
		f[i] = binary.BigEndian.AppendUint64(nil, v)
	}
	return f
}

// ParseBWReport decodes the five Sends of a report. Values are taken as
// they come (a perftest server's are garbage).
func ParseBWReport(f [ReportFields][]byte) (BWReport, error) {
	var v [ReportFields]uint64
	for i, b := range f {
		if len(b) < ReportFieldLen {
			return BWReport{}, fmt.Errorf("%w: bw report field %d: %d octets, want %d", ErrShort, i, len(b), ReportFieldLen)
		}
		v[i] = binary.BigEndian.Uint64(b)
	}
	return BWReport{Size: v[0], Iters: v[1], BWPeak: math.Float64frombits(v[2]),
		BWAvg: math.Float64frombits(v[3]), MsgRate: math.Float64frombits(v[4])}, nil
}

// CreditLen is the send_bw credit over iWARP (ctx_alloc_credit,
// run_iter_bw_server): the receiver RDMA Writes a uint32, the count of
// Sends it has received, into the sender's credit buffer, in the host's
// byte order (little-endian on x86, as captured), with no conversion.
const CreditLen = 4

// AppendCredit appends a credit as an x86 perftest writes it.
func AppendCredit(b []byte, n uint32) []byte { return binary.LittleEndian.AppendUint32(b, n) }

// ParseCredit decodes a credit.
func ParseCredit(b []byte) (uint32, error) {
	if len(b) < CreditLen {
		return 0, fmt.Errorf("%w: credit: %d octets, want %d", ErrShort, len(b), CreditLen)
	}
	return binary.LittleEndian.Uint32(b), nil
}
