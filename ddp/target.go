package ddp

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

// target is where one segment's payload goes: a window of exactly the
// segment's payload length into registered memory (a tagged buffer) or
// into a posted untagged buffer's scatter list, already checked against
// RFC 5041 §7.1.
type target struct {
	flat []byte   // tagged: the destination octets
	sgl  [][]byte // untagged: the buffer's scatter list
	off  int      // untagged: MO
}

// write copies p, the segment's payload, into the target.
func (t *target) write(p []byte) {
	if t.flat != nil {
		copy(t.flat, p)
		return
	}
	off := t.off
	for _, s := range t.sgl {
		if len(p) == 0 {
			return
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(s[off:], p)
		p = p[n:]
		off = 0
	}
}
