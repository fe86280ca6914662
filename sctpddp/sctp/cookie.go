package sctp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// CookieKeyLen is the length of a State Cookie secret key: that of the
// HMAC-SHA256 output (RFC 2104 §3 recommends a key no shorter than the
// hash output).
const CookieKeyLen = sha256.Size

// CookieKeys are the secret keys that authenticate the State Cookies an
// endpoint sends (RFC 9260 §5.1.3: "The secret key SHOULD be random ...
// The secret key SHOULD be changed reasonably frequently (e.g., hourly)").
// It holds the current key, with which cookies are made, and the previous
// one, so that a cookie made just before a rotation is still accepted.
// Each key has an epoch that the cookie carries; a cookie whose epoch is
// neither key's is silently discarded (§5.1.5 step 1: "If secrets are kept
// only for a limited amount of time and the secret key to use is not
// available anymore, the packet containing the COOKIE ECHO chunk MUST be
// silently discarded").
//
// CookieKeys is a value: Rotate returns new keys and changes nothing, so a
// listener can publish its keys through an atomic.Pointer while handshake
// functions read them on other goroutines. The zero value holds no key and
// makes every handshake function fail.
type CookieKeys struct {
	current, previous [CookieKeyLen]byte
	epoch             uint32 // the current key's; the previous key's is epoch-1
	hasPrevious       bool
	ok                bool
}

// NewCookieKeys returns keys with a current key read from rand
// (crypto/rand.Reader in production) and no previous key.
func NewCookieKeys(rand io.Reader) (CookieKeys, error) {
	var k CookieKeys
	if _, err := io.ReadFull(rand, k.current[:]); err != nil {
		return CookieKeys{}, fmt.Errorf("sctp: reading a State Cookie key: %w", err)
	}
	k.ok = true
	return k, nil
}

// Rotate returns keys whose current key is new, read from rand, and whose
// previous key is k's current key. Cookies made with k's previous key are
// no longer accepted.
func (k CookieKeys) Rotate(rand io.Reader) (CookieKeys, error) {
	if !k.ok {
		return NewCookieKeys(rand)
	}
	n := CookieKeys{previous: k.current, epoch: k.epoch + 1, hasPrevious: true, ok: true}
	if _, err := io.ReadFull(rand, n.current[:]); err != nil {
		return CookieKeys{}, fmt.Errorf("sctp: reading a State Cookie key: %w", err)
	}
	return n, nil
}

// Bound returns keys derived from k for one peer: each of k's keys
// replaced by its HMAC-SHA256 of peer, with the same epochs. A listener
// that makes the cookies of each peer address with keys bound to it
// accepts a COOKIE ECHO only from the address its INIT ACK went to: a
// cookie obtained from one address and echoed from others (spoofed ones
// included) fails the MAC, so that one INIT cannot open associations for
// many addresses. RFC 9260 §5.1.3 leaves what the cookie authenticates to
// the implementation; the addresses are what the packet's IP and UDP
// headers carry, outside the SCTP packet. It allocates nothing.
func (k CookieKeys) Bound(peer []byte) CookieKeys {
	if !k.ok {
		return k
	}
	b := k
	b.current = hmacKey(&k.current, peer)
	if k.hasPrevious {
		b.previous = hmacKey(&k.previous, peer)
	}
	return b
}

// hmacKey returns the HMAC-SHA256 of text under key, on the stack, text
// at most a block long (longer is cut).
func hmacKey(key *[CookieKeyLen]byte, text []byte) [CookieKeyLen]byte {
	var inner [2 * sha256.BlockSize]byte
	var outer [sha256.BlockSize + sha256.Size]byte
	for i := range sha256.BlockSize {
		var c byte
		if i < len(key) {
			c = key[i]
		}
		inner[i] = c ^ 0x36
		outer[i] = c ^ 0x5c
	}
	n := copy(inner[sha256.BlockSize:], text)
	sum := sha256.Sum256(inner[:sha256.BlockSize+n])
	copy(outer[sha256.BlockSize:], sum[:])
	return sha256.Sum256(outer[:])
}

// key returns the key of an epoch, if it is kept.
func (k *CookieKeys) key(epoch uint32) (*[CookieKeyLen]byte, bool) {
	switch {
	case !k.ok:
		return nil, false
	case epoch == k.epoch:
		return &k.current, true
	case k.hasPrevious && epoch == k.epoch-1:
		return &k.previous, true
	}
	return nil, false
}

// StateCookie is what the State Cookie of an INIT ACK carries: everything
// the sender of the INIT ACK needs to create the association when the
// COOKIE ECHO comes back, so that it keeps nothing in between (RFC 9260
// §5.1 B: "After sending an INIT ACK chunk with the State Cookie
// parameter, "Z" MUST NOT allocate any resources or keep any states for
// the new association"). Local is the endpoint that makes the cookie,
// Peer the sender of the INIT.
//
// On the wire the cookie has a fixed size, CookieLen bytes, all fields
// big-endian:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Format = 1   |     Flags     |          Local Port           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Peer Port           |           Local OS            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Local MIS           |            Peer OS            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Peer MIS            |         Reserved = 0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Key Epoch                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Local Verification Tag                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Peer Verification Tag                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Local Initial TSN                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Peer Initial TSN                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Peer a_rwnd                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Peer Adaptation Code Point                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Local-Tie-Tag                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Peer's-Tie-Tag                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+           Creation Time (microseconds since 1970)            +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Lifespan (milliseconds)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	/          HMAC-SHA256 of the 64 bytes above (32 bytes)          /
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags: bit 0, the peer sent an Adaptation Layer Indication (its code
// point follows); bit 1, the peer sent Zero Checksum Acceptable with the
// DTLS EDMID; bit 2, the local endpoint sent Zero Checksum Acceptable.
//
// The cookie is not encrypted: it holds only what the two endpoints
// exchanged in the INIT and INIT ACK, the local clock and the key epoch
// (§5.1.3: "If the State Cookie is not encrypted, it MUST NOT contain
// information that is not being envisioned to be shared").
type StateCookie struct {
	LocalPort, PeerPort uint16

	// LocalVerificationTag is the Initiate Tag of the INIT ACK: the
	// Verification Tag of the packets the peer sends, COOKIE ECHO
	// included. PeerVerificationTag is the Initiate Tag of the INIT.
	LocalVerificationTag, PeerVerificationTag uint32

	LocalInitialTSN, PeerInitialTSN uint32
	PeerARwnd                       uint32

	// LocalOS and LocalMIS are the streams of the INIT ACK, PeerOS and
	// PeerMIS those of the INIT.
	LocalOS, LocalMIS, PeerOS, PeerMIS uint16

	PeerAdaptation Adaptation

	// PeerZeroChecksum: the INIT held Zero Checksum Acceptable with the
	// DTLS EDMID. LocalZeroChecksum: the INIT ACK did.
	PeerZeroChecksum, LocalZeroChecksum bool

	// The Tie-Tags of RFC 9260 §5.2.2: the tags of the association that
	// existed when the INIT ACK was made, or 0 when there was none.
	LocalTieTag, PeerTieTag uint32

	// Created is when the cookie was made, kept to the microsecond;
	// Lifespan is how long it is valid, kept to the millisecond.
	Created  time.Time
	Lifespan time.Duration
}

// CookieLen is the length of every State Cookie this package makes.
const CookieLen = cookieBodyLen + sha256.Size

const (
	cookieFormat = 1

	cookieFlagPeerAdaptation   = 1 << 0
	cookieFlagPeerZeroChecksum = 1 << 1
	cookieFlagLocalZeroCheck   = 1 << 2

	cookieFormatOff      = 0
	cookieFlagsOff       = 1
	cookieLocalPortOff   = 2
	cookiePeerPortOff    = 4
	cookieLocalOSOff     = 6
	cookieLocalMISOff    = 8
	cookiePeerOSOff      = 10
	cookiePeerMISOff     = 12
	cookieReservedOff    = 14
	cookieEpochOff       = 16
	cookieLocalTagOff    = 20
	cookiePeerTagOff     = 24
	cookieLocalTSNOff    = 28
	cookiePeerTSNOff     = 32
	cookiePeerARwndOff   = 36
	cookieAdaptationOff  = 40
	cookieLocalTieTagOff = 44
	cookiePeerTieTagOff  = 48
	cookieCreatedOff     = 52
	cookieLifespanOff    = 60
	cookieBodyLen        = 64
)

// Errors of OpenCookie. For each the COOKIE ECHO is silently discarded
// (RFC 9260 §5.1.5 steps 1 and 2); ErrStaleCookie alone asks for an answer.
var (
	// ErrCookieLength reports a State Cookie that is not CookieLen bytes
	// long: not one this package made.
	ErrCookieLength = errors.New("sctp: State Cookie of the wrong length")
	// ErrCookieKey reports a State Cookie made with a key no longer kept.
	ErrCookieKey = errors.New("sctp: State Cookie made with a key no longer kept")
	// ErrCookieMAC reports a State Cookie whose MAC does not authenticate
	// it (§5.1.5 step 2: "If this comparison fails, the SCTP packet,
	// including the COOKIE ECHO chunk and any DATA chunks, MUST be
	// silently discarded").
	ErrCookieMAC = errors.New("sctp: State Cookie MAC mismatch")
	// ErrStaleCookie reports an authentic State Cookie whose lifespan has
	// passed; the error is a *StaleCookieError.
	ErrStaleCookie = errors.New("sctp: stale State Cookie")
)

// StaleCookieError reports an authentic State Cookie older than its
// lifespan (RFC 9260 §5.1.5 step 4: "the endpoint MUST transmit an ERROR
// chunk with a "Stale Cookie" error cause to the peer endpoint").
// errors.Is(err, ErrStaleCookie) reports true for it.
type StaleCookieError struct {
	// Staleness is the Measure of Staleness of the Stale Cookie error
	// cause (§3.3.10.3): "the difference, rounded up in microseconds,
	// between the current time and the time the State Cookie expired".
	Staleness uint32
}

func (e *StaleCookieError) Error() string {
	return fmt.Sprintf("sctp: State Cookie stale by %d µs", e.Staleness)
}

// Is reports whether target is ErrStaleCookie.
func (e *StaleCookieError) Is(target error) bool { return target == ErrStaleCookie }

// Append appends the cookie, authenticated with the current key of keys,
// to b: CookieLen bytes. It panics if keys hold no key, which is a bug in
// the caller.
func (c *StateCookie) Append(b []byte, keys *CookieKeys) []byte {
	if !keys.ok {
		panic("sctp: State Cookie made without a key")
	}
	start := len(b)
	b = append(b, cookieFormat, c.flags())
	b = binary.BigEndian.AppendUint16(b, c.LocalPort)
	b = binary.BigEndian.AppendUint16(b, c.PeerPort)
	b = binary.BigEndian.AppendUint16(b, c.LocalOS)
	b = binary.BigEndian.AppendUint16(b, c.LocalMIS)
	b = binary.BigEndian.AppendUint16(b, c.PeerOS)
	b = binary.BigEndian.AppendUint16(b, c.PeerMIS)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint32(b, keys.epoch)
	b = binary.BigEndian.AppendUint32(b, c.LocalVerificationTag)
	b = binary.BigEndian.AppendUint32(b, c.PeerVerificationTag)
	b = binary.BigEndian.AppendUint32(b, c.LocalInitialTSN)
	b = binary.BigEndian.AppendUint32(b, c.PeerInitialTSN)
	b = binary.BigEndian.AppendUint32(b, c.PeerARwnd)
	b = binary.BigEndian.AppendUint32(b, c.PeerAdaptation.CodePoint)
	b = binary.BigEndian.AppendUint32(b, c.LocalTieTag)
	b = binary.BigEndian.AppendUint32(b, c.PeerTieTag)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Created.UnixMicro()))
	b = binary.BigEndian.AppendUint32(b, lifespanMillis(c.Lifespan))
	mac := cookieMAC(&keys.current, b[start:])
	return append(b, mac[:]...)
}

// cookieMAC returns the HMAC-SHA256 of a cookie's body under key (RFC
// 2104 §2: H(K XOR opad, H(K XOR ipad, text)), the key zero-padded to the
// hash's block), computed on the stack: unlike crypto/hmac it allocates
// nothing, so that a flood of INITs or forged COOKIE ECHOs costs the
// endpoint hashing only. TestCookieMAC checks it against crypto/hmac.
func cookieMAC(key *[CookieKeyLen]byte, body []byte) [sha256.Size]byte {
	var inner [sha256.BlockSize + cookieBodyLen]byte
	var outer [sha256.BlockSize + sha256.Size]byte
	for i := range sha256.BlockSize {
		var k byte
		if i < len(key) {
			k = key[i]
		}
		inner[i] = k ^ 0x36
		outer[i] = k ^ 0x5c
	}
	copy(inner[sha256.BlockSize:], body)
	sum := sha256.Sum256(inner[:])
	copy(outer[sha256.BlockSize:], sum[:])
	return sha256.Sum256(outer[:])
}

func (c *StateCookie) flags() byte {
	var f byte
	if c.PeerAdaptation.Present {
		f |= cookieFlagPeerAdaptation
	}
	if c.PeerZeroChecksum {
		f |= cookieFlagPeerZeroChecksum
	}
	if c.LocalZeroChecksum {
		f |= cookieFlagLocalZeroCheck
	}
	return f
}

// lifespanMillis returns d in whole milliseconds, rounded down and held to
// the 32 bits of the field.
func lifespanMillis(d time.Duration) uint32 {
	return uint32(min(max(d.Milliseconds(), 0), math.MaxUint32))
}

// OpenCookie authenticates the State Cookie b of a COOKIE ECHO and returns
// what it carries, in the order of RFC 9260 §5.1.5: the key of the
// cookie's epoch (ErrCookieKey if it is no longer kept), then the MAC,
// compared in constant time (ErrCookieMAC), then the lifespan. A cookie
// whose lifespan has passed at now is returned with a *StaleCookieError:
// §5.2.4 step 3 accepts it when a TCB exists whose tags it matches.
//
// Comparing the cookie's ports and Verification Tag with the packet's
// (step 3 of §5.1.5) is the caller's, as HandleCookieEcho does.
func OpenCookie(b []byte, keys *CookieKeys, now time.Time) (StateCookie, error) {
	if len(b) != CookieLen {
		return StateCookie{}, ErrCookieLength
	}
	key, ok := keys.key(binary.BigEndian.Uint32(b[cookieEpochOff:]))
	if !ok {
		return StateCookie{}, ErrCookieKey
	}
	if mac := cookieMAC(key, b[:cookieBodyLen]); !hmac.Equal(mac[:], b[cookieBodyLen:]) {
		return StateCookie{}, ErrCookieMAC
	}
	if b[cookieFormatOff] != cookieFormat {
		// Authentic, so made by a version of this package that wrote
		// another format under the same key.
		return StateCookie{}, ErrCookieLength
	}
	flags := b[cookieFlagsOff]
	c := StateCookie{
		LocalPort:            binary.BigEndian.Uint16(b[cookieLocalPortOff:]),
		PeerPort:             binary.BigEndian.Uint16(b[cookiePeerPortOff:]),
		LocalOS:              binary.BigEndian.Uint16(b[cookieLocalOSOff:]),
		LocalMIS:             binary.BigEndian.Uint16(b[cookieLocalMISOff:]),
		PeerOS:               binary.BigEndian.Uint16(b[cookiePeerOSOff:]),
		PeerMIS:              binary.BigEndian.Uint16(b[cookiePeerMISOff:]),
		LocalVerificationTag: binary.BigEndian.Uint32(b[cookieLocalTagOff:]),
		PeerVerificationTag:  binary.BigEndian.Uint32(b[cookiePeerTagOff:]),
		LocalInitialTSN:      binary.BigEndian.Uint32(b[cookieLocalTSNOff:]),
		PeerInitialTSN:       binary.BigEndian.Uint32(b[cookiePeerTSNOff:]),
		PeerARwnd:            binary.BigEndian.Uint32(b[cookiePeerARwndOff:]),
		PeerAdaptation: Adaptation{
			Present:   flags&cookieFlagPeerAdaptation != 0,
			CodePoint: binary.BigEndian.Uint32(b[cookieAdaptationOff:]),
		},
		PeerZeroChecksum:  flags&cookieFlagPeerZeroChecksum != 0,
		LocalZeroChecksum: flags&cookieFlagLocalZeroCheck != 0,
		LocalTieTag:       binary.BigEndian.Uint32(b[cookieLocalTieTagOff:]),
		PeerTieTag:        binary.BigEndian.Uint32(b[cookiePeerTieTagOff:]),
		Created:           time.UnixMicro(int64(binary.BigEndian.Uint64(b[cookieCreatedOff:]))),
		Lifespan:          time.Duration(binary.BigEndian.Uint32(b[cookieLifespanOff:])) * time.Millisecond,
	}
	// §5.1.5 step 4: "If the elapsed time is longer than the lifespan
	// carried in the State Cookie, then the packet ... SHOULD be
	// discarded, and the endpoint MUST transmit an ERROR chunk with a
	// "Stale Cookie" error cause to the peer endpoint."
	if late := now.Sub(c.Created.Add(c.Lifespan)); late > 0 {
		us := (late + time.Microsecond - 1) / time.Microsecond
		return c, &StaleCookieError{Staleness: uint32(min(int64(us), math.MaxUint32))}
	}
	return c, nil
}

// Established returns the association the cookie describes, as its maker
// (the passive side) sees it.
func (c *StateCookie) Established() Established {
	return Established{
		LocalPort:            c.LocalPort,
		PeerPort:             c.PeerPort,
		LocalVerificationTag: c.LocalVerificationTag,
		PeerVerificationTag:  c.PeerVerificationTag,
		LocalInitialTSN:      c.LocalInitialTSN,
		PeerInitialTSN:       c.PeerInitialTSN,
		PeerARwnd:            c.PeerARwnd,
		OutboundStreams:      min(c.LocalOS, c.PeerMIS),
		InboundStreams:       min(c.LocalMIS, c.PeerOS),
		PeerAdaptation:       c.PeerAdaptation,
		SendZeroChecksum:     c.PeerZeroChecksum,
		ReceiveZeroChecksum:  c.LocalZeroChecksum,
	}
}

// Adaptation is the Adaptation Layer Indication a peer sent in its INIT
// or INIT ACK (RFC 5061 §4.2.6), or its absence.
type Adaptation struct {
	Present   bool   // the parameter was there
	CodePoint uint32 // its Adaptation Code Point
}

// DDP reports whether the peer supports the DDP/SCTP adaptation layer:
// RFC 5043 §11.1's table row "DDP". For the rows "NONE" (the indication
// is absent: "RDMA and DDP procedures MUST NOT be performed upon this
// association") and "ANY-OTHER Indication" ("DDP procedures MUST NOT be
// performed upon this association") it reports false.
func (a Adaptation) DDP() bool { return a.Present && a.CodePoint == chunk.AdaptationCodePointDDP }

func (a Adaptation) String() string {
	switch {
	case !a.Present:
		return "NONE"
	case a.DDP():
		return "DDP"
	}
	return fmt.Sprintf("%#08x", a.CodePoint)
}
