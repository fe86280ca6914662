package rdmap

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/term"
)

// Access is a set of access rights on registered memory.
type Access uint8

// Access rights. Local read is always granted.
const (
	LocalWrite  Access = 1 << iota // the local ULP's receives and RDMA Read responses may write it
	RemoteRead                     // the peer may read it with RDMA Read
	RemoteWrite                    // the peer may write it with RDMA Write
	// RemoteAtomic: the peer may operate on it with RFC 7306's Atomic
	// Operations (IBV_ACCESS_REMOTE_ATOMIC). Atomic Operations read and
	// write the memory; RemoteRead and RemoteWrite are not needed too.
	RemoteAtomic
)

// remoteRights are the rights a memory window can grant.
const remoteRights = RemoteRead | RemoteWrite | RemoteAtomic

func (a Access) String() string {
	s := "LOCAL_READ"
	if a&LocalWrite != 0 {
		s += "|LOCAL_WRITE"
	}
	if a&RemoteRead != 0 {
		s += "|REMOTE_READ"
	}
	if a&RemoteWrite != 0 {
		s += "|REMOTE_WRITE"
	}
	if a&RemoteAtomic != 0 {
		s += "|REMOTE_ATOMIC"
	}
	return s
}

// Errors from memory registration.
var (
	ErrTooManySTags = errors.New("rdmap: no free STag: the device's registration limit is reached")
	ErrPDLimit      = errors.New("rdmap: the protection domain's registration limit is reached")
	ErrInvalidSTag  = errors.New("rdmap: the STag is not valid (never registered, deregistered or invalidated)")
	ErrWrongPD      = errors.New("rdmap: the STag belongs to another protection domain")
	ErrWrongQP      = errors.New("rdmap: the STag is bound to another queue pair")
	ErrBounds       = errors.New("rdmap: the range is outside the registered memory")
	ErrRights       = errors.New("rdmap: the memory region lacks the access rights this needs")
	ErrWindowBound  = errors.New("rdmap: the memory region still has memory windows bound to it")
)

// Device is a software RNIC: it owns the STag namespace that its
// protection domains share, so that an STag of another domain is told
// apart from one that does not exist (RFC 5041 §7.2 codes 0x00 and 0x02).
type Device struct {
	mu    sync.RWMutex // guards stags, keys and freed
	stags map[uint32]*region
	keys  map[uint32]uint8 // the last key of indices freed and not yet used again
	// freed is a ring of the last indices freed, oldest at freedHead once
	// full (remove): keys holds no more than they.
	freed     []freedSTag
	freedHead int
	rng       *rand.Rand
	max       int
	nextPD    uint32
	// fixedIndex, if not zero, is the only index handed out (tests of
	// key rotation).
	fixedIndex uint32
	onEvent    func(AsyncEvent)
}

// DeviceConfig sets a Device's limits.
type DeviceConfig struct {
	// MaxSTags bounds the memory regions and windows registered at once
	// (RFC 5042 §6.4.1: RNIC resources have limits). Default 1<<16.
	MaxSTags int
	// OnEvent, if set, receives every asynchronous event of the device's
	// queue pairs and completion queues. It must not block.
	OnEvent func(AsyncEvent)
}

// freedSTag is an STag index given back, with the key it had.
type freedSTag struct {
	idx uint32
	key uint8
}

// NewDevice returns a device.
func NewDevice(cfg DeviceConfig) *Device {
	if cfg.MaxSTags <= 0 {
		cfg.MaxSTags = 1 << 16
	}
	var seed [32]byte
	crand.Read(seed[:])
	return &Device{
		stags: make(map[uint32]*region), keys: make(map[uint32]uint8),
		rng: rand.New(rand.NewChaCha8(seed)), max: cfg.MaxSTags, onEvent: cfg.OnEvent,
	}
}

func (d *Device) event(e AsyncEvent) {
	if d.onEvent != nil {
		d.onEvent(e)
	}
}

// ProtectionDomain groups memory and queue pairs: an STag is usable only
// on the queue pairs of its own domain (RFC 5042 §2.2.4-2.2.5, §6.1.1;
// RFC 5040 §8.1.1 item 1).
type ProtectionDomain struct {
	dev *Device
	id  uint32
	// Guarded by dev.mu.
	qps      []*QueuePair // queue pairs made in the domain and not yet closed
	stags    int          // STags registered in the domain (regions and windows)
	bytes    int64        // octets of its memory regions
	maxSTags int          // SetLimits; 0: no limit of its own
	maxBytes int64
}

// SetLimits bounds the STags (memory regions and windows) and the octets
// of memory regions that can be registered in the domain at once, below
// the device's own limits: what one peer's connection can make a program
// hold, when each connection has a domain of its own. 0 means no limit of
// the domain's own. Registrations beyond fail with ErrPDLimit.
func (pd *ProtectionDomain) SetLimits(maxSTags int, maxBytes int64) {
	pd.dev.mu.Lock()
	defer pd.dev.mu.Unlock()
	pd.maxSTags, pd.maxBytes = maxSTags, maxBytes
}

// NewProtectionDomain allocates a protection domain.
func (d *Device) NewProtectionDomain() *ProtectionDomain {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextPD++
	return &ProtectionDomain{dev: d, id: d.nextPD}
}

// region is what an STag names: a memory region, or a memory window onto
// one.
type region struct {
	stag    uint32
	pd      *ProtectionDomain
	mem     []byte
	base    uint64 // the Tagged Offset of mem[0]
	access  Access
	valid   bool
	qp      *QueuePair // a window bound to one DDP Stream (QueuePair.BindWindow); nil: the domain's
	parent  *region    // windows: the region they are bound to
	windows int        // regions: windows bound to it
}

// MemoryRegion is registered memory, named by an STag.
type MemoryRegion struct{ r *region }

// STag returns the region's Steering Tag: a 24-bit index and an 8-bit key.
func (m *MemoryRegion) STag() uint32 { return m.r.stag }

// Base returns the Tagged Offset of the region's first octet.
func (m *MemoryRegion) Base() uint64 { return m.r.base }

// Len returns the region's length.
func (m *MemoryRegion) Len() int { return len(m.r.mem) }

// Bytes returns the registered memory itself.
func (m *MemoryRegion) Bytes() []byte { return m.r.mem }

// Access returns the region's rights.
func (m *MemoryRegion) Access() Access { return m.r.access }

// Word returns the 64-bit word at offset off of the region, for the
// program's own sync/atomic operations beside its peers' Atomic
// Operations, which this package carries out with the same hardware
// atomics: atomic.AddUint64(w, 1) on a counter that peers FetchAdd stays
// exact. The word is in the machine's byte order, as RFC 7306's FetchAdd
// has it; off must leave it 64-bit aligned in memory and inside the
// region.
func (m *MemoryRegion) Word(off int) (*uint64, error) {
	if off < 0 || off > len(m.r.mem)-8 {
		return nil, fmt.Errorf("rdmap: no 8-octet word at offset %d of a %d-octet region", off, len(m.r.mem))
	}
	w, ok := atomicWord(m.r.mem[off:])
	if !ok {
		return nil, fmt.Errorf("rdmap: the word at offset %d is not 64-bit aligned in memory", off)
	}
	return w, nil
}

// RegisterMemory registers buf with the given rights; its first octet has
// Tagged Offset base. The STag's index is drawn at random and its key
// differs from the last key used with that index, so STags are neither
// predictable nor reused at once (RFC 5040 §8.1.1 item 8). STag 0 is never
// handed out.
func (pd *ProtectionDomain) RegisterMemory(buf []byte, base uint64, access Access) (*MemoryRegion, error) {
	if uint64(len(buf)) > 0 && base > ^uint64(0)-uint64(len(buf)-1) {
		return nil, fmt.Errorf("rdmap: a %d-octet region at Tagged Offset %#x would wrap", len(buf), base)
	}
	r := &region{pd: pd, mem: buf, base: base, access: access, valid: true}
	if err := pd.dev.insert(r); err != nil {
		return nil, err
	}
	return &MemoryRegion{r}, nil
}

func (d *Device) insert(r *region) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.insertLocked(r)
}

// insertLocked gives r an STag. The caller holds d.mu.
func (d *Device) insertLocked(r *region) error {
	if len(d.stags) >= d.max {
		return ErrTooManySTags
	}
	pd := r.pd
	n := int64(len(r.mem))
	if r.parent != nil {
		n = 0 // a window's memory is its region's
	}
	if (pd.maxSTags > 0 && pd.stags >= pd.maxSTags) || (pd.maxBytes > 0 && pd.bytes+n > pd.maxBytes) {
		return fmt.Errorf("%w (%d STags, %d octets registered; limits %d, %d)", ErrPDLimit, pd.stags, pd.bytes, pd.maxSTags, pd.maxBytes)
	}
	pd.stags++
	pd.bytes += n
	for {
		idx := d.rng.Uint32() & 0xffffff
		if d.fixedIndex != 0 {
			idx = d.fixedIndex
		}
		if idx == 0 {
			continue
		}
		if _, used := d.stags[idx]; used {
			continue
		}
		key := uint8(d.rng.Uint32())
		if last, ok := d.keys[idx]; ok {
			if key == last {
				key++
			}
			// The index is in use again: its key is in its STag.
			delete(d.keys, idx)
		}
		r.stag = idx<<8 | uint32(key)
		d.stags[idx] = r
		return nil
	}
}

// Deregister releases the region; its STag becomes invalid at once.
func (m *MemoryRegion) Deregister() error {
	d := m.r.pd.dev
	d.mu.Lock()
	if cur := d.stags[m.r.stag>>8]; cur != m.r {
		d.mu.Unlock()
		return ErrInvalidSTag
	}
	if m.r.windows > 0 {
		d.mu.Unlock()
		return ErrWindowBound
	}
	d.remove(m.r)
	qps := slices.Clone(m.r.pd.qps)
	d.mu.Unlock()
	revoke(qps, true)
	return nil
}

// revoke waits, once an STag has been removed, until no segment is being
// placed on the queue pairs: "An RNIC MUST ensure that the network
// interface can no longer modify an Advertised Buffer after the ULP
// revokes remote access rights for an STag." (RFC 5040 §8.1.1 item 6) A
// segment checked before the removal may still be writing to the memory;
// one checked after finds the STag invalid. For a local revocation it
// also waits until no Read Response whose STag was checked before the
// removal is still being read by the LLP (QueuePair.respMu): one checked
// after finds it invalid and is not sent. Deregister and Invalidate
// return only then, and the memory is the program's again. A remote
// invalidation, which runs on a stream's receive side, waits for
// placements only: it must not wait for a send that may itself wait for
// the peer to read; Responses already handed to the LLP answer Read
// Requests the peer sent before it invalidated.
func revoke(qps []*QueuePair, local bool) {
	for _, qp := range qps {
		qp.stream.Quiesce()
		if local {
			qp.respMu.Lock()
			qp.respMu.Unlock()
		}
	}
}

// remove takes r out of the STag namespace and remembers its key, so
// that the index's next STag has another. The keys of the last MaxSTags
// indices freed are remembered, no more: the device's bookkeeping is
// bounded by its registration limit, however often peers come and go. An
// index forgotten is one of 2^24, drawn again with a random key. The
// caller holds d.mu.
func (d *Device) remove(r *region) {
	r.valid = false
	idx := r.stag >> 8
	delete(d.stags, idx)
	if len(d.freed) == d.max {
		old := d.freed[d.freedHead]
		if k, ok := d.keys[old.idx]; ok && k == old.key {
			delete(d.keys, old.idx)
		}
		d.freed[d.freedHead] = freedSTag{idx, uint8(r.stag)}
		d.freedHead = (d.freedHead + 1) % d.max
	} else {
		d.freed = append(d.freed, freedSTag{idx, uint8(r.stag)})
	}
	d.keys[idx] = uint8(r.stag)
	r.pd.stags--
	if r.parent != nil {
		r.parent.windows--
	} else {
		r.pd.bytes -= int64(len(r.mem))
	}
}

// MemoryWindow is a narrower view of a memory region with its own STag.
type MemoryWindow struct{ r *region }

// STag returns the window's Steering Tag.
func (w *MemoryWindow) STag() uint32 { return w.r.stag }

// Base returns the Tagged Offset of the window's first octet.
func (w *MemoryWindow) Base() uint64 { return w.r.base }

// Len returns the window's length.
func (w *MemoryWindow) Len() int { return len(w.r.mem) }

// BindWindow binds a memory window to length octets of m from offset,
// with rights that must be a subset of m's remote rights. The window's
// STag is usable on every queue pair of m's protection domain (RFC 5041
// §8.2's Protection Domain association); QueuePair.BindWindow makes one
// for a single queue pair.
func (m *MemoryRegion) BindWindow(offset uint64, length int, access Access) (*MemoryWindow, error) {
	return m.bindWindow(nil, offset, length, access)
}

// BindWindow binds a memory window as MemoryRegion.BindWindow does, and
// associates its STag with this queue pair's DDP Stream alone (RFC 5041
// §8.2's DDP Stream association; a type 2 window in verbs): a peer's
// access through it on any other queue pair of the domain is refused
// with the STag-not-associated Terminate of its layer, and, since no
// other stream shares it, the peer may invalidate it with a Send with
// Invalidate on this one even when the domain has other queue pairs. m
// must belong to the queue pair's protection domain. The window stays
// usable on no queue pair once this one is closed; Invalidate releases
// it.
func (qp *QueuePair) BindWindow(m *MemoryRegion, offset uint64, length int, access Access) (*MemoryWindow, error) {
	if m.r.pd != qp.pd {
		return nil, ErrWrongPD
	}
	return m.bindWindow(qp, offset, length, access)
}

func (m *MemoryRegion) bindWindow(qp *QueuePair, offset uint64, length int, access Access) (*MemoryWindow, error) {
	if access&^remoteRights != 0 {
		return nil, fmt.Errorf("rdmap: a memory window grants remote rights only, not %v", access)
	}
	if access&^m.r.access != 0 {
		return nil, fmt.Errorf("%w: window rights %v exceed the region's %v", ErrRights, access, m.r.access)
	}
	if offset > uint64(len(m.r.mem)) || uint64(length) > uint64(len(m.r.mem))-offset {
		return nil, ErrBounds
	}
	w := &region{pd: m.r.pd, qp: qp, mem: m.r.mem[offset : offset+uint64(length)], base: m.r.base + offset, access: access, valid: true, parent: m.r}
	d := m.r.pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	// Checked under the lock that Deregister and Invalidate take, so that
	// a window is never bound to memory they have given back.
	if !m.r.valid {
		return nil, ErrInvalidSTag
	}
	if err := d.insertLocked(w); err != nil {
		return nil, err
	}
	m.r.windows++
	return &MemoryWindow{w}, nil
}

// Invalidate invalidates an STag of this domain locally (a region or a
// window): it is rejected from then on. A region's STag can be
// invalidated only when no window is bound to it.
func (pd *ProtectionDomain) Invalidate(stag uint32) error {
	return pd.dev.invalidate(pd, stag, nil)
}

// ErrSharedSTag is the reason a peer may not invalidate an STag.
var ErrSharedSTag = errors.New("rdmap: the STag is enabled for remote access on several streams")

// invalidate removes stag; pd must own it. A remote invalidation (a Send
// with Invalidate arriving on the queue pair remote; nil for a local one)
// needs an STag associated with that stream, and one enabled for remote
// access that several streams share is refused: "An RNIC MUST ensure that
// a Remote Peer is not able to invalidate an STag enabled for remote
// access, if the STag is shared on multiple streams." (RFC 5040 §8.1.1
// item 7; RFC 5042 §6.4.5). An STag of the protection domain's is shared
// when the domain has more than one queue pair; a window bound to one
// queue pair never is.
func (d *Device) invalidate(pd *ProtectionDomain, stag uint32, remote *QueuePair) error {
	d.mu.Lock()
	r := d.stags[stag>>8]
	var err error
	switch {
	case r == nil || r.stag != stag || !r.valid:
		err = ErrInvalidSTag
	case r.pd != pd:
		err = ErrWrongPD
	case remote != nil && r.qp != nil && r.qp != remote:
		err = ErrWrongQP
	case remote != nil && r.sharedLocked():
		err = ErrSharedSTag
	case r.windows > 0:
		err = ErrWindowBound
	}
	if err != nil {
		d.mu.Unlock()
		return err
	}
	d.remove(r)
	qps := slices.Clone(pd.qps)
	if r.qp != nil {
		// A window bound to one queue pair is reached through it alone.
		qps = []*QueuePair{r.qp}
	}
	d.mu.Unlock()
	revoke(qps, remote == nil)
	return nil
}

// stagFault is why an STag does not allow a peer's access.
type stagFault uint8

const (
	stagOK            stagFault = iota
	stagInvalid                 // unknown, deregistered or invalidated
	stagNotAssociated           // another protection domain's
	stagRights                  // lacks the rights the access needs
)

// ddp returns the fault as DDP's tagged buffer error (RFC 5041 §7.2).
// RFC 5041 has no access-rights code; a buffer that does not allow the
// placement is not a valid target STag (ddp's documentation).
func (f stagFault) ddp() *term.Error {
	switch f {
	case stagInvalid, stagRights:
		return term.DDPInvalidSTag
	case stagNotAssociated:
		return term.DDPSTagNotAssociated
	}
	return nil
}

// rdmap returns the fault as RDMAP's remote protection error (RFC 5040
// Figure 9).
func (f stagFault) rdmap() *term.Error {
	switch f {
	case stagInvalid:
		return term.RDMAPInvalidSTag
	case stagNotAssociated:
		return term.RDMAPSTagNotAssociated
	case stagRights:
		return term.RDMAPAccessRights
	}
	return nil
}

// lookup resolves an STag for a peer's access on qp's stream: it must
// exist, be valid, be associated with the stream (belong to qp's
// protection domain and, for a window bound to one queue pair, to qp:
// RFC 5041 §8.2), and grant need.
func (d *Device) lookup(qp *QueuePair, stag uint32, need Access) (*region, stagFault) {
	d.mu.RLock()
	r := d.stags[stag>>8]
	ok := r != nil && r.stag == stag && r.valid
	d.mu.RUnlock()
	switch {
	case !ok:
		return nil, stagInvalid
	case r.pd != qp.pd, r.qp != nil && r.qp != qp:
		return nil, stagNotAssociated
	case r.access&need != need:
		return nil, stagRights
	}
	return r, stagOK
}

// valid reports whether r's STag is still valid.
func (d *Device) valid(r *region) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return r.valid
}

func (r *region) tagged() ddp.TaggedBuffer { return ddp.TaggedBuffer{Mem: r.mem, Base: r.base} }

// u32 reads a big-endian uint32.
func u32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// shared reports whether a peer may not invalidate stag because several
// streams share it (see invalidate).
func (d *Device) shared(stag uint32) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	r := d.stags[stag>>8]
	return r != nil && r.stag == stag && r.sharedLocked()
}

// sharedLocked reports whether r is enabled for remote access on more
// than one stream. d.mu is held.
func (r *region) sharedLocked() bool {
	return r.access&remoteRights != 0 && r.qp == nil && len(r.pd.qps) > 1
}

// atomicWord returns the 64-bit word at the start of mem, the target of
// an Atomic Operation, if its address is 64-bit aligned: "FetchAdd Atomic
// Operations MUST target ULP Buffer addresses that are 64-bit aligned";
// "CmpSwap Atomic Operations MUST target ULP Buffer addresses that are
// 64-bit aligned" (RFC 7306 §5.1.1, §5.1.2). The ULP Buffer address is
// the memory's own: a Tagged Offset "MAY start at an arbitrary offset but
// MUST represent a ULP Buffer address that is 64-bit aligned" (§5.2.1).
func atomicWord(mem []byte) (*uint64, bool) {
	if len(mem) < 8 {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(mem))
	if uintptr(p)%8 != 0 {
		return nil, false
	}
	return (*uint64)(p), true
}

// executeAtomic performs req on the word w and returns the Original
// Remote Data Value. The read-modify-write is one hardware atomic
// operation (a compare-and-swap loop), so that "Atomicity of the
// Read-Modify-Write (RMW) on the Responder's node by the Atomic Operation
// MUST be assured in the context of concurrent atomic accesses by other
// RDMAP Streams on the same RNIC" (RFC 7306 §5.3) holds across every
// queue pair and device of the process, and also against the program's
// own sync/atomic operations on the word (which §5.4 rule 2's note makes
// OPTIONAL). "The FetchAdd operation is performed in the endian format of
// the target memory": the word is in the machine's byte order
// (binary.NativeEndian), the value returned a plain number.
func executeAtomic(w *uint64, req *AtomicRequest) uint64 {
	for {
		old := atomic.LoadUint64(w)
		v, write := req.Apply(old)
		if !write || atomic.CompareAndSwapUint64(w, old, v) {
			return old
		}
	}
}
