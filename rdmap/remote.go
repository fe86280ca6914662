package rdmap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RemoteBufferLen is the length of a RemoteBuffer's wire form.
const RemoteBufferLen = 16

// RemoteBuffer describes registered memory a peer may access: the STag,
// the Tagged Offset of its first octet and its length. How the peers
// exchange it is up to them (RFC 5040 §2.2: the ULP advertises buffers);
// its 16-octet wire form is the usual carrier, in the private data of a
// connection's set-up (as rdma_cm programs pass theirs) or in a Send:
//
//	0               4                              12              16
//	+---------------+-------------------------------+---------------+
//	|     STag      |              TO               |    length     |
//	+---------------+-------------------------------+---------------+
//
// all big-endian. `iwarp serve` advertises its region this way.
type RemoteBuffer struct {
	STag uint32
	TO   uint64
	Len  uint32
}

// ErrShortRemoteBuffer is returned by ParseRemoteBuffer for fewer than
// RemoteBufferLen octets.
var ErrShortRemoteBuffer = errors.New("rdmap: a remote buffer descriptor needs 16 octets")

// Remote returns the descriptor of the whole region, for its peer. A
// region of 2^32 octets or more is described by its first 2^32 - 1.
func (m *MemoryRegion) Remote() RemoteBuffer {
	n := uint64(m.Len())
	if n > 1<<32-1 {
		n = 1<<32 - 1
	}
	return RemoteBuffer{STag: m.STag(), TO: m.Base(), Len: uint32(n)}
}

// Append appends the 16-octet wire form to b.
func (r RemoteBuffer) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, r.STag)
	b = binary.BigEndian.AppendUint64(b, r.TO)
	return binary.BigEndian.AppendUint32(b, r.Len)
}

// ParseRemoteBuffer decodes the wire form at the start of b and returns
// it with the octets it took.
func ParseRemoteBuffer(b []byte) (RemoteBuffer, int, error) {
	if len(b) < RemoteBufferLen {
		return RemoteBuffer{}, 0, ErrShortRemoteBuffer
	}
	return RemoteBuffer{
		STag: binary.BigEndian.Uint32(b[0:4]),
		TO:   binary.BigEndian.Uint64(b[4:12]),
		Len:  binary.BigEndian.Uint32(b[12:16]),
	}, RemoteBufferLen, nil
}

// Write returns an RDMA Write of src's first n octets to the buffer at
// offset off, or an error if they do not fit in it.
func (r RemoteBuffer) Write(id uint64, src *MemoryRegion, off uint64, n uint32) (WriteWR, error) {
	if err := r.fits(off, n); err != nil {
		return WriteWR{}, err
	}
	return WriteWR{ID: id, SGL: []SGE{{MR: src, Length: n}}, RemoteSTag: r.STag, RemoteTO: r.TO + off}, nil
}

// Read returns an RDMA Read of n octets at offset off of the buffer into
// sink's first octets, or an error if they do not fit in it.
func (r RemoteBuffer) Read(id uint64, sink *MemoryRegion, off uint64, n uint32) (ReadWR, error) {
	if err := r.fits(off, n); err != nil {
		return ReadWR{}, err
	}
	return ReadWR{ID: id, Local: SGE{MR: sink, Length: n}, RemoteSTag: r.STag, RemoteTO: r.TO + off}, nil
}

// ErrRemoteBounds is the error of RemoteBuffer.Write and Read for a range
// outside the peer's buffer: the work request is not made, since the peer
// would answer it with a Terminate (RFC 5041 §7.2's Base or bounds
// violation).
var ErrRemoteBounds = errors.New("rdmap: the range is outside the peer's buffer")

func (r RemoteBuffer) fits(off uint64, n uint32) error {
	if off > uint64(r.Len) || uint64(n) > uint64(r.Len)-off {
		return fmt.Errorf("%w: %d octets at offset %d do not fit its %d octets", ErrRemoteBounds, n, off, r.Len)
	}
	return nil
}

func (r RemoteBuffer) String() string {
	return fmt.Sprintf("STag %#08x TO %#x length %d", r.STag, r.TO, r.Len)
}
