package llp

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// patternKey is mixed into every word so that a run of zeros, or a buffer
// left over from an earlier test, never passes the check.
const patternKey = 0x9e3779b97f4a7c15

// Fill writes the pattern of the stream bytes [off, off+len(b)) into b:
// the 8 octets at stream offset 8k hold k ^ patternKey, little-endian.
// off and len(b) are multiples of 8.
func Fill(b []byte, off int64) {
	k := uint64(off) / 8
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], k^patternKey)
		k++
	}
}

// Check reports whether b holds the pattern of the stream bytes
// [off, off+len(b)), and if not, where the first wrong word is.
func Check(b []byte, off int64) error {
	k := uint64(off) / 8
	for i := 0; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != k^patternKey {
			return fmt.Errorf("llp: wrong data at stream offset %d", off+int64(i))
		}
		k++
	}
	return nil
}

// Offset returns the stream offset that a unit starting with b's first
// word claims to start at.
func Offset(b []byte) int64 {
	if len(b) < 8 {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(b)^patternKey) * 8
}

// Counter is what a receiver has verified: the bytes that arrived with
// the right pattern, the units that arrived twice, and the first error
// (corrupt or misplaced data). It is safe for concurrent use.
type Counter struct {
	bytes atomic.Int64
	dups  atomic.Int64
	last  atomic.Int64 // time.Now().UnixNano() of the last verified byte

	mu   sync.Mutex
	err  error
	seen []uint64 // bitmap of units received, for message transports
}

// Add counts n verified bytes.
func (c *Counter) Add(n int) {
	c.bytes.Add(int64(n))
	c.last.Store(time.Now().UnixNano())
}

// Bytes returns the verified bytes so far.
func (c *Counter) Bytes() int64 { return c.bytes.Load() }

// Dups returns how many units arrived more than once.
func (c *Counter) Dups() int64 { return c.dups.Load() }

// Last returns when the last verified byte arrived (0 if none has).
func (c *Counter) Last() time.Time {
	n := c.last.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Fail records err if it is the first.
func (c *Counter) Fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Err returns the first error recorded.
func (c *Counter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// maxUnits bounds the bitmap of units seen (2^24 units: 1 TiB of 64 KiB
// messages, 128 GiB of 8000-octet records).
const maxUnits = 1 << 24

// CheckUnit verifies a unit of a message transport (one SCTP message, one
// DTLS record), which may arrive in any order: it must start at a
// multiple of size in the stream and hold the pattern from there. A unit
// seen before counts as a duplicate, not as bytes.
func (c *Counter) CheckUnit(b []byte, size int) error {
	off := Offset(b)
	if off < 0 || off%int64(size) != 0 || off/int64(size) >= maxUnits {
		return fmt.Errorf("llp: a %d-octet unit claims stream offset %d", len(b), off)
	}
	if err := Check(b, off); err != nil {
		return err
	}
	i := uint64(off / int64(size))
	c.mu.Lock()
	for uint64(len(c.seen)) <= i/64 {
		c.seen = append(c.seen, 0)
	}
	dup := c.seen[i/64]&(1<<(i%64)) != 0
	c.seen[i/64] |= 1 << (i % 64)
	c.mu.Unlock()
	if dup {
		c.dups.Add(1)
		return nil
	}
	c.Add(len(b))
	return nil
}
