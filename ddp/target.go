package ddp

import "io"

// TaggedBuffer is the memory behind an STag as the ULP resolves it for
// one segment: Mem holds the octets at Tagged Offsets [Base, Base+len(Mem)).
type TaggedBuffer struct {
	Mem  []byte
	Base uint64
}

// Buffer is an untagged buffer posted to one of a stream's queues: a
// scatter list of memory and an identifier the ULP gets back at delivery.
type Buffer struct {
	SGL [][]byte
	ID  uint64
}

// Len returns the buffer's total length.
func (b *Buffer) Len() int {
	n := 0
	for _, s := range b.SGL {
		n += len(s)
	}
	return n
}

// Target is where one segment's payload goes: a window of exactly the
// segment's payload length into registered memory (a tagged buffer) or
// into a posted untagged buffer's scatter list, already checked against
// RFC 5041 §7.1. The LLP writes the payload into it straight from its
// socket or packet buffer. A Target is valid until the matching End (or
// Abort) call.
type Target struct {
	flat []byte   // tagged: the destination octets
	sgl  [][]byte // untagged: the buffer's scatter list
	off  int      // untagged: MO
	n    int
}

// Len returns the payload length the target expects.
func (t *Target) Len() int { return t.n }

// Each calls fn with each contiguous piece of the target in order, until
// fn returns an error. The pieces together are exactly Len() octets.
func (t *Target) Each(fn func(p []byte) error) error {
	if t.n == 0 {
		return nil
	}
	if t.flat != nil {
		return fn(t.flat)
	}
	off, left := t.off, t.n
	for _, s := range t.sgl {
		if off >= len(s) {
			off -= len(s)
			continue
		}
		p := s[off:]
		off = 0
		if len(p) > left {
			p = p[:left]
		}
		if err := fn(p); err != nil {
			return err
		}
		left -= len(p)
		if left == 0 {
			break
		}
	}
	return nil
}

// Write copies p into the target. p must be exactly Len() octets long.
func (t *Target) Write(p []byte) (int, error) {
	if len(p) != t.n {
		return 0, io.ErrShortWrite
	}
	if t.flat != nil {
		return copy(t.flat, p), nil
	}
	done := 0
	t.Each(func(d []byte) error {
		done += copy(d, p[done:])
		return nil
	})
	return done, nil
}

// ReadFrom fills the target with exactly Len() octets read from r, piece
// by piece, with no intermediate buffer.
func (t *Target) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	err := t.Each(func(d []byte) error {
		n, err := io.ReadFull(r, d)
		total += int64(n)
		return err
	})
	return total, err
}
