package sctp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/iwarpgo/iwarp/sctpddp/sctp/chunk"
)

// Established is an association as the handshake leaves it, for the
// association to build its TCB from (RFC 9260 §14.2). Local is this
// endpoint.
type Established struct {
	LocalPort, PeerPort uint16

	// LocalVerificationTag is My Verification Tag: the tag every packet
	// the peer sends carries, the Initiate Tag this endpoint sent.
	// PeerVerificationTag is Peer Verification Tag: the tag every packet
	// this endpoint sends carries (§8.5).
	LocalVerificationTag, PeerVerificationTag uint32

	// LocalInitialTSN is the TSN of this endpoint's first DATA chunk;
	// PeerInitialTSN minus one is the Cumulative TSN Ack Point to start
	// from (§5.1: "each endpoint MUST set its internal Cumulative TSN Ack
	// Point to the value of its transmitted Initial TSN minus one").
	LocalInitialTSN, PeerInitialTSN uint32

	// PeerARwnd is the a_rwnd of the peer's INIT or INIT ACK: the initial
	// Peer Rwnd.
	PeerARwnd uint32

	// OutboundStreams is min(local OS, peer MIS), InboundStreams
	// min(local MIS, peer OS) (§5.1.1: "the valid outbound stream
	// identifier range for either endpoint MUST be 0 to min(local OS,
	// remote MIS) - 1").
	OutboundStreams, InboundStreams uint16

	// PeerAdaptation is the peer's Adaptation Layer Indication; RFC 5043
	// §11.1 allows DDP on the association only if PeerAdaptation.DDP().
	PeerAdaptation Adaptation

	// SendZeroChecksum: the peer sent Zero Checksum Acceptable with the
	// DTLS EDMID, so this endpoint may send packets with a zero Checksum
	// (RFC 9653). ReceiveZeroChecksum: this endpoint sent it, so it
	// accepts such packets.
	SendZeroChecksum, ReceiveZeroChecksum bool
}

// HandshakeConfig is what this endpoint announces in its INIT or INIT
// ACK, and how it treats the peer's. The zero value of each optional
// field is its default.
type HandshakeConfig struct {
	// LocalPort is this endpoint's SCTP port. The active side sends from
	// it; the passive side discards an INIT to another port, or accepts
	// any when it is 0.
	LocalPort uint16
	// PeerPort is the port the active side sends its INIT to.
	PeerPort uint16

	// ARwnd is the a_rwnd this endpoint announces: at least
	// chunk.MinARwnd (RFC 9260 §3.3.2: "The Advertised Receiver Window
	// Credit MUST NOT be smaller than 1500").
	ARwnd uint32
	// OutboundStreams (OS) and InboundStreams (MIS) are the streams this
	// endpoint announces; neither may be 0.
	OutboundStreams, InboundStreams uint16

	// ZeroChecksum announces the Zero Checksum Acceptable parameter with
	// the DTLS EDMID (RFC 9653): the association then accepts packets
	// whose Checksum is 0. Set it only when SCTP runs over DTLS.
	ZeroChecksum bool

	// AdaptationCodePoint is the code point of the Adaptation Layer
	// Indication every INIT and INIT ACK carries (RFC 5043 §11.1: "a
	// DDP/SCTP adaptation layer MUST include an adaptation layer
	// indication in its INIT or INIT-ACK"). 0 means
	// chunk.AdaptationCodePointDDP.
	AdaptationCodePoint uint32
	// RequireDDP refuses a peer whose Adaptation Layer Indication is not
	// DDP's, with an ABORT, instead of only reporting it (RFC 5043 §7.1:
	// "Once an endpoint decides on its acceptable Adaptation
	// Indication(s), it SHOULD terminate all requests to establish an
	// association with any different Adaptation Indication").
	RequireDDP bool

	// CookieLifetime is the lifespan of the State Cookies the passive
	// side makes; 0 means DefaultCookieLifetime.
	CookieLifetime time.Duration
	// MaxLifeSpanIncrement bounds the Suggested Cookie Life-Span
	// Increment of a Cookie Preservative the passive side honours
	// (§3.3.2.1.3: "The receiver MAY choose to ignore the suggested
	// cookie life span increase for its own security reasons"); 0 means
	// DefaultMaxLifeSpanIncrement, a negative value ignores the
	// parameter.
	MaxLifeSpanIncrement time.Duration
}

const (
	// DefaultCookieLifetime is RFC 9260 §16's Valid.Cookie.Life.
	DefaultCookieLifetime = 60 * time.Second
	// DefaultMaxLifeSpanIncrement follows §5.2.6, where the sender of a
	// Cookie Preservative "SHOULD add no more than 1 second beyond the
	// measured RTT".
	DefaultMaxLifeSpanIncrement = time.Second

	// maxReport bounds the bytes of parameters reported back as
	// unrecognized, so that the reports stay a bounded part of the INIT
	// ACK or COOKIE ECHO packet however many unknown parameters the peer
	// sends.
	maxReport = 512
)

func (c *HandshakeConfig) check() error {
	switch {
	case c.ARwnd < chunk.MinARwnd:
		return fmt.Errorf("sctp: HandshakeConfig.ARwnd %d below %d", c.ARwnd, chunk.MinARwnd)
	case c.OutboundStreams == 0 || c.InboundStreams == 0:
		return errors.New("sctp: HandshakeConfig with 0 streams")
	}
	return nil
}

func (c *HandshakeConfig) adaptationCodePoint() uint32 {
	if c.AdaptationCodePoint == 0 {
		return chunk.AdaptationCodePointDDP
	}
	return c.AdaptationCodePoint
}

func (c *HandshakeConfig) cookieLifetime() time.Duration {
	if c.CookieLifetime <= 0 {
		return DefaultCookieLifetime
	}
	return c.CookieLifetime
}

// lifespan returns the lifespan of a cookie answering an INIT whose Cookie
// Preservative suggested inc milliseconds more.
func (c *HandshakeConfig) lifespan(inc uint32) time.Duration {
	limit := c.MaxLifeSpanIncrement
	if limit == 0 {
		limit = DefaultMaxLifeSpanIncrement
	}
	d := c.cookieLifetime()
	if limit > 0 {
		d += min(time.Duration(inc)*time.Millisecond, limit)
	}
	return d
}

// appendParams appends the parameters every INIT and INIT ACK of this
// endpoint carries.
//
// RFC 8261 §6.1, for SCTP over DTLS: "The INIT and INIT-ACK chunk MUST
// NOT contain any IPv4 Address or IPv6 Address parameters. The INIT chunk
// MUST NOT contain the Supported Address Types parameter." DTLS, not SCTP,
// owns the addresses, so neither is ever sent.
func (c *HandshakeConfig) appendParams(b []byte) []byte {
	b = chunk.AdaptationLayerIndication{AdaptationCodePoint: c.adaptationCodePoint()}.Append(b)
	if c.ZeroChecksum {
		b = chunk.ZeroChecksumAcceptable{EDMID: chunk.EDMIDDTLS}.Append(b)
	}
	return b
}

// Errors of the handshake functions, besides the chunk package's
// (chunk.ErrZeroInitiateTag, chunk.ErrSmallARwnd, chunk.ErrZeroStreams,
// chunk.ErrMissingStateCookie and its parse errors), which they wrap.
var (
	// ErrUnexpectedChunk reports a packet whose first chunk is not the one
	// the function handles.
	ErrUnexpectedChunk = errors.New("sctp: unexpected chunk")
	// ErrBundled reports an INIT or INIT ACK bundled with other chunks
	// (RFC 9260 §6.10: "An endpoint MUST NOT bundle INIT, INIT ACK, or
	// SHUTDOWN COMPLETE chunks with any other chunks"); the packet is
	// discarded.
	ErrBundled = errors.New("sctp: INIT or INIT ACK bundled with other chunks")
	// ErrVerificationTag reports a packet whose Verification Tag is not
	// the one expected (§8.5, §8.5.1, §5.1.5 step 3); it is silently
	// discarded.
	ErrVerificationTag = errors.New("sctp: Verification Tag mismatch")
	// ErrPort reports a packet to or from the wrong port, or port 0
	// (§3.1: "The port number 0 MUST NOT be used"); it is discarded.
	ErrPort = errors.New("sctp: port mismatch")
	// ErrHostNameAddress reports an INIT or INIT ACK with a Host Name
	// Address parameter, answered with an ABORT (§5.1.2 B).
	ErrHostNameAddress = errors.New("sctp: Host Name Address parameter")
	// ErrPeerAdaptation reports a peer whose Adaptation Layer Indication
	// is not DDP's, refused because HandshakeConfig.RequireDDP is set.
	ErrPeerAdaptation = errors.New("sctp: peer's Adaptation Layer Indication is not DDP's")
)

// peerParams is what the handshake reads from the parameters of an INIT
// or INIT ACK.
type peerParams struct {
	adaptation   Adaptation
	zeroChecksum bool   // Zero Checksum Acceptable with the DTLS EDMID
	lifeSpanInc  uint32 // Cookie Preservative, in milliseconds
	hostName     chunk.Param
	// reports[:reportLen] are the unrecognized parameters to report:
	// Unrecognized Parameter parameters for an INIT (§3.3.3.1.2), the
	// unrecognized TLVs, each padded, for an INIT ACK's Unrecognized
	// Parameters error cause (§3.3.10.8). They are held here, not in a
	// slice, so that a peerParams on the stack stays there.
	reports      [maxReport]byte
	reportLen    int
	unrecognized int // parameters reported
}

// reported returns the reports.
func (p *peerParams) reported() []byte { return p.reports[:p.reportLen] }

// read reads the parameters of an INIT (initAck false) or INIT ACK into
// p, which must be zero. Parameters must have been checked (ParseInit,
// ParseInitAck).
//
// A parameter this package does not recognise is handled as its type's
// upper two bits say (RFC 9260 §3.2.1, Table 3): 00 stop processing
// parameters, 01 stop and report, 10 skip, 11 skip and report. "Please
// note that, when an INIT or INIT ACK chunk is received, in all four
// cases, an INIT ACK or COOKIE ECHO chunk is sent in response,
// respectively. In the 00 or 01 case, the processing of the parameters
// after the unknown parameter is canceled, but no processing already done
// is rolled back." The State Cookie is mandatory, so the INIT ACK's is
// looked for beyond such a parameter too (by the caller).
func (p *peerParams) read(ps []byte, initAck bool) {
	it := chunk.Params(ps)
	for it.Next() {
		prm := it.Param()
		switch t := prm.Type(); t {
		case chunk.ParamIPv4Address, chunk.ParamIPv6Address, chunk.ParamSupportedAddressTypes:
			// Recognised and ignored. RFC 8261 §8: "SCTP should not
			// process the IP addresses used for the underlying
			// communication since DTLS provides no guarantees about
			// them." Every association is single-homed on its DTLS
			// connection (§6.1), which is what RFC 9260 §5.1.2 A asks
			// when an INIT has no address: the source of the packet is
			// the only destination. This endpoint lists no address in
			// its INIT ACK, so the peer's Supported Address Types asks
			// nothing of it.
		case chunk.ParamHostNameAddress:
			if p.hostName == nil {
				p.hostName = prm
			}
		case chunk.ParamCookiePreservative:
			if !initAck {
				p.lifeSpanInc = binary.BigEndian.Uint32(prm.Value())
			}
		case chunk.ParamAdaptationLayerIndication:
			// "Unless otherwise noted, each parameter MUST only be
			// included once in the INIT chunk": the first counts.
			if !p.adaptation.Present {
				p.adaptation = Adaptation{Present: true, CodePoint: binary.BigEndian.Uint32(prm.Value())}
			}
		case chunk.ParamZeroChecksumAcceptable:
			if binary.BigEndian.Uint32(prm.Value()) == chunk.EDMIDDTLS {
				p.zeroChecksum = true
			}
		case chunk.ParamStateCookie, chunk.ParamUnrecognizedParameter,
			chunk.ParamSupportedExtensions, chunk.ParamHeartbeatInfo:
			// Recognised; the State Cookie is read by the caller, the
			// rest asks nothing of the handshake.
		default:
			a := t.Unrecognized()
			if a.Report() {
				p.report(prm, initAck)
			}
			if a.Stop() {
				return
			}
		}
	}
}

func (p *peerParams) report(prm chunk.Param, initAck bool) {
	if initAck {
		// The padding stays as the zero array has it.
		if n := chunk.PaddedLen(len(prm)); p.reportLen+n <= maxReport {
			copy(p.reports[p.reportLen:], prm)
			p.reportLen += n
			p.unrecognized++
		}
		return
	}
	// §3.3.3.1.2: "The Parameter Value field will contain an
	// unrecognized parameter copied from the INIT chunk complete with
	// Parameter Type, Length, and Value fields."
	r := chunk.RawParam{Type: chunk.ParamUnrecognizedParameter, Value: prm}
	if n := r.Len(); p.reportLen+n <= maxReport {
		r.Append(p.reports[p.reportLen:p.reportLen])
		p.reportLen += n
		p.unrecognized++
	}
}

// randomTagTSN reads an Initiate Tag and an Initial TSN from rand,
// through scratch, at least 8 bytes: "Initiate Tag values SHOULD be
// selected from the range of 1 to 2^32 - 1" (§5.3.1), "the Initial TSN
// SHOULD be set to a random value in that range [0 to 4294967295]"
// (§3.3.2). A buffer handed to an io.Reader escapes to the heap, so
// HandleInit lends the spare room of its dst.
func randomTagTSN(rand io.Reader, scratch []byte) (tag, tsn uint32, err error) {
	b := scratch[:8]
	if _, err := io.ReadFull(rand, b); err != nil {
		return 0, 0, fmt.Errorf("sctp: reading a random Initiate Tag and TSN: %w", err)
	}
	tag, tsn = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	for range 8 {
		if tag != 0 {
			return tag, tsn, nil
		}
		if _, err := io.ReadFull(rand, b[:4]); err != nil {
			return 0, 0, fmt.Errorf("sctp: reading a random Initiate Tag: %w", err)
		}
		tag = binary.BigEndian.Uint32(b)
	}
	return 0, 0, errors.New("sctp: random source returns zeros")
}

// appendAbort builds a packet holding an ABORT chunk with causes.
func appendAbort(dst []byte, srcPort, dstPort uint16, vtag uint32, t bool, causes []byte) []byte {
	var w chunk.Builder
	w.Start(dst, srcPort, dstPort, vtag)
	w.Buf = chunk.Abort{T: t, Causes: causes}.Append(w.Buf)
	return w.Finish()
}

// refusalCause returns the error cause of an ABORT refusing an INIT or
// INIT ACK for err, one of the fixed-field errors of chunk.Init.Check or
// ErrPeerAdaptation.
func refusalCause(err error) []byte {
	if errors.Is(err, ErrPeerAdaptation) {
		return chunk.RawCause{Code: chunk.CauseUserInitiatedAbort, Info: []byte(adaptationReason)}.Append(nil)
	}
	// §3.3.10.7: "This error cause is returned to the originator of an
	// INIT or INIT ACK chunk when one of the mandatory parameters is set
	// to an invalid value."
	return chunk.RawCause{Code: chunk.CauseInvalidMandatoryParameter}.Append(nil)
}

// adaptationReason is the Upper Layer Abort Reason of the ABORT refusing a
// peer without DDP's Adaptation Layer Indication: the refusal is the
// DDP/SCTP adaptation layer's, not SCTP's.
const adaptationReason = "RFC 5043: DDP Adaptation Layer Indication required"

// unresolvableAddress returns the Unresolvable Address error cause for a
// Host Name Address parameter (§3.3.10.5: "The Unresolvable Address field
// contains the complete Type, Length, and Value of the address parameter
// (or Host Name parameter)").
func unresolvableAddress(p chunk.Param) []byte {
	return chunk.RawCause{Code: chunk.CauseUnresolvableAddress, Info: p}.Append(nil)
}

// InitResult is what HandleInit did with an INIT.
type InitResult struct {
	// Packet is the packet to send back, INIT ACK or ABORT, built in the
	// buffer HandleInit was given; nil when the INIT is discarded.
	Packet []byte
	// Abort reports that Packet holds an ABORT.
	Abort bool

	// What the INIT said, for the caller's log or policy; the State
	// Cookie carries it to HandleCookieEcho.
	PeerAdaptation   Adaptation
	PeerZeroChecksum bool
	// Unrecognized is the number of parameters reported in Unrecognized
	// Parameter parameters of the INIT ACK.
	Unrecognized int
}

// HandleInit answers an INIT received by an endpoint that has no
// association with its sender (RFC 9260 §5.1 B), the passive side of the
// handshake: it returns an INIT ACK carrying a State Cookie, or an ABORT,
// or nothing, with an error saying why when it is not an INIT ACK. The
// packet is built in dst (from its start, growing it if it is short) and
// its Checksum is always the CRC32c.
//
// pkt is the received packet, its CRC32c already verified (the CRC32c of
// an INIT is checked even where zero checksums are accepted, RFC 9653);
// dst must not overlap it. The Initiate Tag and Initial TSN are read from
// rand; now dates the cookie.
//
// HandleInit keeps no state: its result depends on its arguments and the
// bytes it reads from rand alone, and it changes nothing but dst (§5.1 B: "After sending an INIT ACK
// chunk with the State Cookie parameter, "Z" MUST NOT allocate any
// resources or keep any states for the new association. Otherwise, "Z"
// will be vulnerable to resource attacks").
//
// The INIT is discarded (no Packet) when its packet's Verification Tag is
// not 0 (§8.5.1 A), when it is bundled with another chunk (§6.10), when a
// port is 0 or not cfg.LocalPort, when it is malformed, and when its
// Initiate Tag is 0 (§3.3.2: "the receiver MUST silently discard the
// packet"). It is refused with an ABORT whose Verification Tag is the
// Initiate Tag for an a_rwnd below 1500 or 0 streams (Invalid Mandatory
// Parameter, §3.3.2), for a Host Name Address (Unresolvable Address,
// §5.1.2 B), and, under cfg.RequireDDP, for a peer whose Adaptation Layer
// Indication is not DDP's (User-Initiated Abort).
func HandleInit(dst, pkt []byte, cfg *HandshakeConfig, keys *CookieKeys, rand io.Reader, now time.Time) (InitResult, error) {
	return handleInit(dst, pkt, cfg, keys, rand, now, nil)
}

// ExistingAssociation is the association an INIT arrives for, as
// HandleUnexpectedInit needs it.
type ExistingAssociation struct {
	// Tags are the association's; its Tie-Tags go into the State Cookie
	// (§5.2.2: "the endpoint MUST copy its current Tie-Tags to a reserved
	// place within the State Cookie and the association's TCB"). They are
	// 0 in COOKIE-WAIT and not 0 in the other states.
	Tags AssociationTags
	// Initiating reports that the association is in COOKIE-WAIT or
	// COOKIE-ECHOED; LocalInitialTSN is then the Initial TSN of its INIT.
	Initiating      bool
	LocalInitialTSN uint32
}

// HandleUnexpectedInit answers an INIT received while an association with
// its sender exists (RFC 9260 §5.2.1 and §5.2.2), as HandleInit answers
// one with none, and with its checks: the association's state does not
// change ("After sending the INIT ACK or ABORT chunk, the endpoint MUST
// take no further actions"). The INIT ACK's State Cookie carries
// ex.Tags' Tie-Tags, so that DecideCookieEcho resolves the COOKIE ECHO
// that may follow into one association.
//
// In COOKIE-WAIT and COOKIE-ECHOED (ex.Initiating), §5.2.1: "an endpoint
// MUST respond with an INIT ACK chunk using the same parameters it sent
// in its original INIT chunk (including its Initiate Tag, unchanged)",
// and "The endpoint uses the parameters sent in its INIT chunk to
// calculate the State Cookie": the INIT ACK's Initiate Tag is
// ex.Tags.Local and its Initial TSN ex.LocalInitialTSN. In the other
// states, §5.2.2: "the INIT ACK chunk MUST contain a new Initiate Tag
// (randomly generated...)", and a new Initial TSN. The restart of
// §5.2.2 with new addresses cannot happen: addresses are not processed
// (RFC 8261 §8). An INIT in SHUTDOWN-ACK-SENT is the association's to
// answer (§9.2), not this function's.
func HandleUnexpectedInit(dst, pkt []byte, cfg *HandshakeConfig, keys *CookieKeys, rand io.Reader, now time.Time, ex *ExistingAssociation) (InitResult, error) {
	return handleInit(dst, pkt, cfg, keys, rand, now, ex)
}

func handleInit(dst, pkt []byte, cfg *HandshakeConfig, keys *CookieKeys, rand io.Reader, now time.Time, ex *ExistingAssociation) (InitResult, error) {
	if err := cfg.check(); err != nil {
		return InitResult{}, err
	}
	if ex != nil && ex.Tags.Local == 0 {
		return InitResult{}, errors.New("sctp: ExistingAssociation without its Verification Tag")
	}
	if !keys.ok {
		return InitResult{}, ErrCookieKey
	}
	it := chunk.Chunks(pkt)
	if !it.Next() {
		return InitResult{}, fmt.Errorf("sctp: INIT packet: %w", orTruncated(it.Err()))
	}
	c := it.Chunk()
	if c.Type() != chunk.TypeInit {
		return InitResult{}, fmt.Errorf("%w: %v, not INIT", ErrUnexpectedChunk, c.Type())
	}
	// §8.5.1 A: "When an endpoint receives an SCTP packet with the
	// Verification Tag set to 0, it SHOULD verify that the packet contains
	// only an INIT chunk. Otherwise, the receiver MUST silently discard
	// the packet." §5.1: "An INIT or INIT ACK chunk MUST NOT be bundled
	// with any other chunk."
	if it.Next() || it.Err() != nil {
		return InitResult{}, ErrBundled
	}
	h := chunk.Header(pkt)
	// §8.5.1 A: for packets carrying an INIT, "The sender MUST set the
	// Verification Tag of the packet to 0."
	if h.VerificationTag() != 0 {
		return InitResult{}, fmt.Errorf("%w: INIT with Verification Tag %#x", ErrVerificationTag, h.VerificationTag())
	}
	local, peer := h.DestinationPort(), h.SourcePort()
	if local == 0 || peer == 0 || (cfg.LocalPort != 0 && local != cfg.LocalPort) {
		return InitResult{}, fmt.Errorf("%w: INIT from port %d to %d", ErrPort, peer, local)
	}
	init, _, err := chunk.ParseInit(c)
	if err != nil {
		return InitResult{}, err
	}
	if err := init.Check(); err != nil {
		if errors.Is(err, chunk.ErrZeroInitiateTag) {
			return InitResult{}, err
		}
		// §3.3.2: "A receiver of an INIT chunk with the a_rwnd value set
		// to a value smaller than 1500 MUST discard the packet, SHOULD
		// send a packet in response containing an ABORT chunk and using
		// the Initiate Tag as the Verification Tag", and so for OS or MIS
		// of 0.
		return abortInit(dst, local, peer, init.InitiateTag, refusalCause(err)), err
	}
	var pp peerParams
	pp.read(init.Params, false)
	res := InitResult{PeerAdaptation: pp.adaptation, PeerZeroChecksum: pp.zeroChecksum, Unrecognized: pp.unrecognized}
	if pp.hostName != nil {
		// §3.3.2.1.4: "The receiver of an INIT chunk or an INIT ACK
		// containing a Host Name Address parameter MUST send an ABORT
		// chunk and MAY include an "Unresolvable Address" error cause."
		r := abortInit(dst, local, peer, init.InitiateTag, unresolvableAddress(pp.hostName))
		r.PeerAdaptation, r.PeerZeroChecksum = res.PeerAdaptation, res.PeerZeroChecksum
		return r, ErrHostNameAddress
	}
	if cfg.RequireDDP && !pp.adaptation.DDP() {
		r := abortInit(dst, local, peer, init.InitiateTag, refusalCause(ErrPeerAdaptation))
		r.PeerAdaptation, r.PeerZeroChecksum = res.PeerAdaptation, res.PeerZeroChecksum
		return r, fmt.Errorf("%w: %v", ErrPeerAdaptation, pp.adaptation)
	}

	scratch := dst[:cap(dst)] // overwritten by the reply
	if len(scratch) < 8 {
		scratch = make([]byte, 8)
	}
	var tag, tsn uint32
	var tie AssociationTags
	switch {
	case ex == nil:
		// §5.2.2: "For a normal association INIT chunk (i.e., the
		// endpoint is in the CLOSED state), the Tie-Tags MUST be set to 0
		// (indicating that no previous TCB existed)."
		if tag, tsn, err = randomTagTSN(rand, scratch); err != nil {
			return InitResult{}, err
		}
	case ex.Initiating:
		tag, tsn, tie = ex.Tags.Local, ex.LocalInitialTSN, ex.Tags
	default:
		tie = ex.Tags
		for range 8 {
			if tag, tsn, err = randomTagTSN(rand, scratch); err != nil {
				return InitResult{}, err
			}
			if tag != ex.Tags.Local {
				break
			}
		}
		if tag == ex.Tags.Local {
			return InitResult{}, errors.New("sctp: random source repeats the association's tag")
		}
	}
	// §3.3.3: the OS of an INIT ACK "MUST NOT be greater than the MIS
	// value sent in the INIT chunk".
	os := min(cfg.OutboundStreams, init.NumInboundStreams)
	cookie := StateCookie{
		LocalPort:            local,
		PeerPort:             peer,
		LocalVerificationTag: tag,
		PeerVerificationTag:  init.InitiateTag,
		LocalInitialTSN:      tsn,
		PeerInitialTSN:       init.InitialTSN,
		PeerARwnd:            init.ARwnd,
		LocalOS:              os,
		LocalMIS:             cfg.InboundStreams,
		PeerOS:               init.NumOutboundStreams,
		PeerMIS:              init.NumInboundStreams,
		PeerAdaptation:       pp.adaptation,
		PeerZeroChecksum:     pp.zeroChecksum,
		LocalZeroChecksum:    cfg.ZeroChecksum,
		LocalTieTag:          tie.LocalTie,
		PeerTieTag:           tie.PeerTie,
		Created:              now,
		Lifespan:             cfg.lifespan(pp.lifeSpanInc),
	}
	// The parameters: State Cookie, this endpoint's own, then the
	// reports; at most 4+CookieLen+16+maxReport bytes.
	var paramBuf [4 + CookieLen + 16 + maxReport]byte
	params := binary.BigEndian.AppendUint16(paramBuf[:0], uint16(chunk.ParamStateCookie))
	params = binary.BigEndian.AppendUint16(params, 4+CookieLen)
	params = cookie.Append(params, keys)
	params = cfg.appendParams(params)
	params = append(params, pp.reported()...)

	var w chunk.Builder
	// §5.1 B: ""Z" MUST set the Verification Tag field to Tag_A and also
	// provide its own Verification Tag (Tag_Z) in the Initiate Tag
	// field."
	w.Start(dst, local, peer, init.InitiateTag)
	w.Buf = chunk.InitAck{
		InitiateTag:        tag,
		ARwnd:              cfg.ARwnd,
		NumOutboundStreams: os,
		NumInboundStreams:  cfg.InboundStreams,
		InitialTSN:         tsn,
		Params:             params,
	}.Append(w.Buf)
	res.Packet = w.Finish()
	return res, nil
}

func abortInit(dst []byte, local, peer uint16, initiateTag uint32, causes []byte) InitResult {
	// §5.1: "The Verification Tag field in the common header of the
	// outbound SCTP packet containing the ABORT chunk MUST be set to the
	// Initiate Tag value of the received INIT or INIT ACK chunk this ABORT
	// chunk is responding to."
	return InitResult{Packet: appendAbort(dst, local, peer, initiateTag, false, causes), Abort: true}
}

func orTruncated(err error) error {
	if err == nil {
		return chunk.ErrTruncated
	}
	return err
}

// HandleCookieEcho handles a COOKIE ECHO received by an endpoint that has
// no association with its sender (RFC 9260 §5.1.5), the passive side of
// the handshake: it authenticates the State Cookie with keys and returns
// the association it describes and the COOKIE ACK to send, built in dst
// with the CRC32c. The caller creates the association and then processes
// the chunks bundled after the COOKIE ECHO, DATA first acknowledged
// (§5.1.5 step 7).
//
// pkt is the received packet, its CRC32c already verified; the COOKIE
// ECHO must be its first chunk (§3.2.2: "Any time a COOKIE ECHO chunk is
// sent in a packet, it MUST be the first chunk"). The packet is silently
// discarded, with no reply and an error, if the cookie is not authentic
// (ErrCookieLength, ErrCookieKey, ErrCookieMAC) or its ports and
// Verification Tag are not the packet's (ErrPort, ErrVerificationTag). A
// stale cookie is answered with an ERROR chunk holding a Stale Cookie
// error cause, and a *StaleCookieError.
//
// An endpoint that has an association with the sender applies §5.2.4
// instead: OpenCookieEcho and DecideCookieEcho.
func HandleCookieEcho(dst, pkt []byte, keys *CookieKeys, now time.Time) ([]byte, Established, error) {
	c, err := OpenCookieEcho(pkt, keys, now)
	if stale, ok := err.(*StaleCookieError); ok {
		// Step 4: "the endpoint MUST transmit an ERROR chunk with a
		// "Stale Cookie" error cause to the peer endpoint."
		return c.AppendStaleCookieError(dst, stale.Staleness), Established{}, err
	}
	if err != nil {
		return nil, Established{}, err
	}
	// Steps 5 and 6: create the association and acknowledge.
	return c.AppendCookieAck(dst), c.Established(), nil
}

// OpenCookieEcho takes the State Cookie out of a COOKIE ECHO packet, its
// first chunk, and checks it as RFC 9260 §5.1.5 steps 1 to 4 say: the key
// and the MAC (OpenCookie), then "Compare the port numbers and the
// Verification Tag contained within the COOKIE ECHO chunk to the actual
// port numbers and the Verification Tag within the SCTP common header of
// the received packet. If these values do not match, the packet MUST be
// silently discarded", then the lifespan. A stale cookie is returned with
// a *StaleCookieError; any other error means the packet is to be
// discarded. HandleCookieEcho is built on it; an endpoint with an
// association follows it with DecideCookieEcho.
func OpenCookieEcho(pkt []byte, keys *CookieKeys, now time.Time) (StateCookie, error) {
	it := chunk.Chunks(pkt)
	if !it.Next() {
		return StateCookie{}, fmt.Errorf("sctp: COOKIE ECHO packet: %w", orTruncated(it.Err()))
	}
	if t := it.Chunk().Type(); t != chunk.TypeCookieEcho {
		return StateCookie{}, fmt.Errorf("%w: %v, not COOKIE ECHO", ErrUnexpectedChunk, t)
	}
	ce, _, err := chunk.ParseCookieEcho(it.Chunk())
	if err != nil {
		return StateCookie{}, err
	}
	c, err := OpenCookie(ce.Cookie, keys, now)
	stale, _ := err.(*StaleCookieError)
	if err != nil && stale == nil {
		return StateCookie{}, err
	}
	h := chunk.Header(pkt)
	if h.DestinationPort() != c.LocalPort || h.SourcePort() != c.PeerPort {
		return StateCookie{}, fmt.Errorf("%w: COOKIE ECHO from port %d to %d", ErrPort, h.SourcePort(), h.DestinationPort())
	}
	if h.VerificationTag() != c.LocalVerificationTag {
		return StateCookie{}, fmt.Errorf("%w: COOKIE ECHO with %#x, cookie for %#x", ErrVerificationTag, h.VerificationTag(), c.LocalVerificationTag)
	}
	return c, err
}

// AppendCookieAck builds in dst, with the CRC32c, the packet holding the
// COOKIE ACK that answers the COOKIE ECHO of c, to its peer's tag.
func (c *StateCookie) AppendCookieAck(dst []byte) []byte {
	var w chunk.Builder
	w.Start(dst, c.LocalPort, c.PeerPort, c.PeerVerificationTag)
	w.Buf = chunk.CookieAck{}.Append(w.Buf)
	return w.Finish()
}

// AppendStaleCookieError builds in dst, with the CRC32c, the packet
// holding the ERROR chunk with a Stale Cookie error cause that answers the
// COOKIE ECHO of c, stale by staleness microseconds, to its peer's tag.
func (c *StateCookie) AppendStaleCookieError(dst []byte, staleness uint32) []byte {
	var w chunk.Builder
	w.Start(dst, c.LocalPort, c.PeerPort, c.PeerVerificationTag)
	var cause [8]byte
	w.Buf = chunk.OperationError{Causes: chunk.StaleCookie{Staleness: staleness}.Append(cause[:0])}.Append(w.Buf)
	return w.Finish()
}

// CookieAction is what RFC 9260 §5.2.4 asks of an endpoint that receives
// a COOKIE ECHO while it has an association with the sender.
type CookieAction uint8

const (
	// CookieDiscard: "For any case not shown in Table 12, the cookie
	// SHOULD be silently discarded."
	CookieDiscard CookieAction = iota
	// CookieStale: step 3, the cookie is older than its lifespan and its
	// tags do not both match the association's: discard it and send an
	// ERROR chunk with a Stale Cookie error cause.
	CookieStale
	// CookieRestart is action (A): "the peer might have restarted";
	// the association is replaced by the cookie's, as after an ABORT
	// followed by a new COOKIE ECHO, with a RESTART notification (or, in
	// SHUTDOWN-ACK-SENT, the SHUTDOWN ACK is resent with an ERROR chunk
	// holding a Cookie Received While Shutting Down error cause).
	CookieRestart
	// CookieCollision is action (B): both sides initialized at once; the
	// association enters or stays in ESTABLISHED, takes the peer's
	// Verification Tag from the cookie, stops T1-init and T1-cookie and
	// sends a COOKIE ACK.
	CookieCollision
	// CookieLate is action (C): "the local endpoint's cookie has arrived
	// late"; it is silently discarded, state and timers unchanged.
	CookieLate
	// CookieDuplicate is action (D): both tags match; the association
	// enters ESTABLISHED if it is in COOKIE-ECHOED, stops T1-cookie and
	// sends a COOKIE ACK.
	CookieDuplicate
)

var cookieActionNames = [...]string{"discard", "stale", "A (restart)", "B (collision)", "C (late cookie)", "D (duplicate)"}

func (a CookieAction) String() string {
	if int(a) < len(cookieActionNames) {
		return cookieActionNames[a]
	}
	return fmt.Sprintf("CookieAction(%d)", uint8(a))
}

// AssociationTags are the tags of an existing association that RFC 9260
// §5.2 compares a handshake chunk's with.
type AssociationTags struct {
	// Local is My Verification Tag; Peer is Peer Verification Tag, 0
	// while it is not known (COOKIE-WAIT).
	Local, Peer uint32
	// LocalTie and PeerTie are the association's Tie-Tags (§5.2.2): "Only
	// when a TCB exists and the association is not in a COOKIE-WAIT or
	// SHUTDOWN-ACK-SENT state are the Tie-Tags populated with a random
	// value other than 0". The association draws them once, keeps them,
	// and hands them to HandleUnexpectedInit, which copies them into the
	// State Cookie.
	LocalTie, PeerTie uint32
}

// DecideCookieEcho applies RFC 9260 §5.2.4 steps 3 and 5 to an authentic
// State Cookie c (from OpenCookie; stale if it returned ErrStaleCookie)
// received by an endpoint whose association has the tags a:
//
//	Local Tag   Peer's Tag   Local-Tie-Tag   Peer's-Tie-Tag   Action
//	X           X            M               M                (A)
//	M           X            A               A                (B)
//	M           0            A               A                (B)
//	X           M            0               0                (C)
//	M           M            A               A                (D)
//
// "X - Tag does not match the existing TCB. M - Tag matches the existing
// TCB. 0 - Tag unknown (Peer's Tag not known yet / No Tie-Tag in cookie).
// A - All cases, i.e., M, X, or 0." The cookie's Verification Tags are
// compared with the association's, its Tie-Tags with the association's
// Tie-Tags (Figure 5: "Tie-Tags in Cookie_Z match Tie-Tags in TCB"). A
// Tie-Tag of 0 is "No Tie-Tag in cookie", never a match.
func DecideCookieEcho(c *StateCookie, stale bool, a AssociationTags) CookieAction {
	localM := c.LocalVerificationTag == a.Local
	peerM := a.Peer != 0 && c.PeerVerificationTag == a.Peer
	if localM && peerM {
		// Step 3: "If both Verification Tags in the State Cookie match
		// the Verification Tags of the current association, consider the
		// State Cookie valid (this is case E in Section 5.2), even if the
		// lifespan is exceeded."
		return CookieDuplicate
	}
	if stale {
		// Step 3: "If the State Cookie is older than the lifespan carried
		// in the State Cookie and the Verification Tags contained in the
		// State Cookie do not match the current association's
		// Verification Tags, the packet ... SHOULD be discarded. The
		// endpoint also MUST transmit an ERROR chunk with a "Stale
		// Cookie" error cause to the peer endpoint."
		return CookieStale
	}
	switch {
	case localM:
		return CookieCollision // M X A A and M 0 A A
	case peerM:
		if c.LocalTieTag == 0 && c.PeerTieTag == 0 {
			return CookieLate // X M 0 0
		}
	case a.Peer != 0 && c.LocalTieTag != 0 && c.PeerTieTag != 0 &&
		c.LocalTieTag == a.LocalTie && c.PeerTieTag == a.PeerTie:
		return CookieRestart // X X M M
	}
	return CookieDiscard
}

// CookieWait is the active side of the handshake between its INIT and
// the peer's INIT ACK: the COOKIE-WAIT state (RFC 9260 §5.1 A). Unlike the
// passive side it keeps state, the tag and TSN it chose, since it asked
// for the association. Retransmitting the INIT on T1-init is AppendInit
// again: "the same INIT or COOKIE ECHO chunk with the same Initiate Tag
// (i.e., Tag_A) or State Cookie is retransmitted" (§5.1.6).
type CookieWait struct {
	Config HandshakeConfig
	// LocalVerificationTag is the Initiate Tag of the INIT (Tag_A);
	// LocalInitialTSN its Initial TSN.
	LocalVerificationTag, LocalInitialTSN uint32
	// LifeSpanIncrement, in milliseconds, adds a Cookie Preservative to
	// the INIT when it is not 0: §5.2.6 has an endpoint whose COOKIE ECHO
	// met a Stale Cookie error send "a new INIT chunk to the endpoint,
	// adding a Cookie Preservative parameter requesting an extension to
	// the life time of the State Cookie".
	LifeSpanIncrement uint32
}

// NewCookieWait starts the active side of a handshake with a tag and
// Initial TSN read from rand. cfg must have both ports.
func NewCookieWait(cfg *HandshakeConfig, rand io.Reader) (*CookieWait, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.LocalPort == 0 || cfg.PeerPort == 0 {
		return nil, fmt.Errorf("%w: HandshakeConfig without both ports", ErrPort)
	}
	tag, tsn, err := randomTagTSN(rand, make([]byte, 8))
	if err != nil {
		return nil, err
	}
	return &CookieWait{Config: *cfg, LocalVerificationTag: tag, LocalInitialTSN: tsn}, nil
}

// AppendInit builds the INIT packet in dst: Verification Tag 0 (§8.5.1 A),
// the Adaptation Layer Indication, Zero Checksum Acceptable if configured,
// and no address and no Supported Address Types (RFC 8261 §6.1), with the
// CRC32c.
func (w *CookieWait) AppendInit(dst []byte) []byte {
	var b chunk.Builder
	b.Start(dst, w.Config.LocalPort, w.Config.PeerPort, 0)
	var paramBuf [24]byte
	params := w.Config.appendParams(paramBuf[:0])
	if w.LifeSpanIncrement != 0 {
		params = chunk.CookiePreservative{LifeSpanIncrement: w.LifeSpanIncrement}.Append(params)
	}
	b.Buf = chunk.Init{
		InitiateTag:        w.LocalVerificationTag,
		ARwnd:              w.Config.ARwnd,
		NumOutboundStreams: w.Config.OutboundStreams,
		NumInboundStreams:  w.Config.InboundStreams,
		InitialTSN:         w.LocalInitialTSN,
		Params:             params,
	}.Append(b.Buf)
	return b.Finish()
}

// HandleInitAck handles the peer's answer to the INIT (§5.1 C) and returns
// the packet to send, built in dst with the CRC32c, and the COOKIE-ECHOED
// state:
//
//   - a COOKIE ECHO with the peer's State Cookie, followed by an ERROR
//     chunk with an Unrecognized Parameters error cause if the INIT ACK
//     held parameters to report (§3.2.2: "it SHOULD bundle the ERROR
//     chunk containing the "Unrecognized Parameters" error cause with the
//     chunk sent in response (e.g., COOKIE ECHO)"), and a nil error;
//   - an ABORT and an error, the association to be destroyed, for an
//     INIT ACK whose Initiate Tag is 0 (§3.3.3: "it MUST destroy the TCB
//     and SHOULD send an ABORT chunk with the T bit set"), whose a_rwnd is
//     below 1500 or a stream count 0 (Invalid Mandatory Parameter), that
//     lacks the State Cookie (Missing Mandatory Parameter, §5.1), that
//     holds a Host Name Address (Unresolvable Address, §3.3.3), or,
//     under Config.RequireDDP, whose Adaptation Layer Indication is not
//     DDP's;
//   - no packet and an error, the endpoint staying in COOKIE-WAIT, for a
//     packet that is not this association's (Verification Tag, ports) or
//     is malformed, or an INIT ACK bundled with other chunks.
//
// pkt is the received packet, its CRC32c already verified, or its
// Checksum 0 if the INIT announced Zero Checksum Acceptable: RFC 9653
// makes the CRC32c mandatory on packets holding INIT or COOKIE ECHO only,
// and pion/sctp sends its INIT ACK with a zero Checksum. The CookieEchoed
// holds a copy of the cookie: pkt may be reused.
func (w *CookieWait) HandleInitAck(dst, pkt []byte) ([]byte, *CookieEchoed, error) {
	it := chunk.Chunks(pkt)
	if !it.Next() {
		return nil, nil, fmt.Errorf("sctp: INIT ACK packet: %w", orTruncated(it.Err()))
	}
	c := it.Chunk()
	if c.Type() != chunk.TypeInitAck {
		return nil, nil, fmt.Errorf("%w: %v, not INIT ACK", ErrUnexpectedChunk, c.Type())
	}
	h := chunk.Header(pkt)
	// §8.5: "When receiving an SCTP packet, the endpoint MUST ensure that
	// the value in the Verification Tag field of the received SCTP packet
	// matches its own tag."
	if h.VerificationTag() != w.LocalVerificationTag {
		return nil, nil, fmt.Errorf("%w: INIT ACK with %#x, expected %#x", ErrVerificationTag, h.VerificationTag(), w.LocalVerificationTag)
	}
	if h.DestinationPort() != w.Config.LocalPort || h.SourcePort() != w.Config.PeerPort {
		return nil, nil, fmt.Errorf("%w: INIT ACK from port %d to %d", ErrPort, h.SourcePort(), h.DestinationPort())
	}
	if it.Next() || it.Err() != nil {
		return nil, nil, ErrBundled
	}
	ia, _, err := chunk.ParseInitAck(c)
	if err != nil {
		return nil, nil, err
	}
	local, peer := w.Config.LocalPort, w.Config.PeerPort
	if err := ia.Check(); err != nil {
		switch {
		case errors.Is(err, chunk.ErrZeroInitiateTag):
			// No tag to fill in: reflect this endpoint's own, T bit set
			// (§3.3.7: "If the Verification Tag is reflected, the T bit
			// MUST be set to 1").
			return appendAbort(dst, local, peer, w.LocalVerificationTag, true, refusalCause(err)), nil, err
		case errors.Is(err, chunk.ErrMissingStateCookie):
			// §5.1: "It SHOULD also specify the cause of abort, such as
			// the type of the missing mandatory parameters".
			var types [2]byte
			cause := chunk.MissingMandatoryParameter{Types: chunk.ParamTypeList(types[:0]).AppendType(chunk.ParamStateCookie)}.Append(nil)
			return appendAbort(dst, local, peer, ia.InitiateTag, false, cause), nil, err
		}
		return appendAbort(dst, local, peer, ia.InitiateTag, false, refusalCause(err)), nil, err
	}
	var pp peerParams
	pp.read(ia.Params, true)
	if pp.hostName != nil {
		return appendAbort(dst, local, peer, ia.InitiateTag, false, unresolvableAddress(pp.hostName)), nil, ErrHostNameAddress
	}
	if w.Config.RequireDDP && !pp.adaptation.DDP() {
		return appendAbort(dst, local, peer, ia.InitiateTag, false, refusalCause(ErrPeerAdaptation)),
			nil, fmt.Errorf("%w: %v", ErrPeerAdaptation, pp.adaptation)
	}
	cookie, _ := chunk.StateCookie(ia.Params)
	e := &CookieEchoed{
		Established: Established{
			LocalPort:            local,
			PeerPort:             peer,
			LocalVerificationTag: w.LocalVerificationTag,
			PeerVerificationTag:  ia.InitiateTag,
			LocalInitialTSN:      w.LocalInitialTSN,
			PeerInitialTSN:       ia.InitialTSN,
			PeerARwnd:            ia.ARwnd,
			// §5.1.1: "If the peer's MIS is less than the endpoint's OS
			// ... the endpoint MUST use MIS outbound streams."
			OutboundStreams:     min(w.Config.OutboundStreams, ia.NumInboundStreams),
			InboundStreams:      min(w.Config.InboundStreams, ia.NumOutboundStreams),
			PeerAdaptation:      pp.adaptation,
			SendZeroChecksum:    pp.zeroChecksum,
			ReceiveZeroChecksum: w.Config.ZeroChecksum,
		},
		Cookie:       bytes.Clone(cookie),
		Unrecognized: pp.unrecognized,
	}
	if e.Cookie == nil {
		e.Cookie = []byte{} // an empty State Cookie is echoed empty
	}
	var b chunk.Builder
	b.Start(dst, local, peer, ia.InitiateTag)
	b.Buf = chunk.CookieEcho{Cookie: e.Cookie}.Append(b.Buf)
	if pp.reportLen > 0 {
		var causeBuf [4 + maxReport]byte
		cause := chunk.RawCause{Code: chunk.CauseUnrecognizedParameters, Info: pp.reported()}.Append(causeBuf[:0])
		b.Buf = chunk.OperationError{Causes: cause}.Append(b.Buf)
	}
	return b.Finish(), e, nil
}

// CookieEchoed is the active side of the handshake between its COOKIE
// ECHO and the peer's COOKIE ACK: the COOKIE-ECHOED state (§5.1 C).
type CookieEchoed struct {
	// Established is the association the COOKIE ACK establishes.
	Established Established
	// Cookie is the peer's State Cookie, echoed unchanged ("This field
	// MUST contain the exact cookie received in the State Cookie
	// parameter from the previous INIT ACK chunk", §3.3.11).
	Cookie []byte
	// Unrecognized is the number of INIT ACK parameters reported in the
	// ERROR chunk bundled with the first COOKIE ECHO.
	Unrecognized int
}

// AppendCookieEcho builds the COOKIE ECHO packet in dst again, for a
// retransmission on T1-cookie (§5.1.4: "If the timer expires, the
// endpoint MUST retransmit the COOKIE ECHO chunk and restart the
// T1-cookie timer"). The ERROR chunk reporting unrecognized parameters is
// not repeated.
func (e *CookieEchoed) AppendCookieEcho(dst []byte) []byte {
	var b chunk.Builder
	b.Start(dst, e.Established.LocalPort, e.Established.PeerPort, e.Established.PeerVerificationTag)
	b.Buf = chunk.CookieEcho{Cookie: e.Cookie}.Append(b.Buf)
	return b.Finish()
}

// HandleCookieAck handles the peer's COOKIE ACK (§5.1 E: "Upon reception
// of the COOKIE ACK chunk, endpoint "A" moves from the COOKIE-ECHOED state
// to the ESTABLISHED state") and returns the association. The COOKIE ACK
// must be the packet's first chunk; the chunks bundled after it are the
// association's to process. A packet with another Verification Tag or
// other ports is discarded with an error.
func (e *CookieEchoed) HandleCookieAck(pkt []byte) (Established, error) {
	it := chunk.Chunks(pkt)
	if !it.Next() {
		return Established{}, fmt.Errorf("sctp: COOKIE ACK packet: %w", orTruncated(it.Err()))
	}
	if t := it.Chunk().Type(); t != chunk.TypeCookieAck {
		return Established{}, fmt.Errorf("%w: %v, not COOKIE ACK", ErrUnexpectedChunk, t)
	}
	h := chunk.Header(pkt)
	if h.VerificationTag() != e.Established.LocalVerificationTag {
		return Established{}, fmt.Errorf("%w: COOKIE ACK with %#x, expected %#x", ErrVerificationTag, h.VerificationTag(), e.Established.LocalVerificationTag)
	}
	if h.DestinationPort() != e.Established.LocalPort || h.SourcePort() != e.Established.PeerPort {
		return Established{}, fmt.Errorf("%w: COOKIE ACK from port %d to %d", ErrPort, h.SourcePort(), h.DestinationPort())
	}
	if _, _, err := chunk.ParseCookieAck(it.Chunk()); err != nil {
		return Established{}, err
	}
	return e.Established, nil
}

// HandleStaleCookie reports whether pkt answers the COOKIE ECHO with an
// ERROR chunk holding a Stale Cookie error cause, and returns its Measure
// of Staleness. RFC 9260 §5.2.6 then leaves the endpoint three
// alternatives: a new INIT; giving up; or a new INIT "adding a Cookie
// Preservative parameter requesting an extension to the life time of the
// State Cookie", for which NewCookieWait and CookieWait.LifeSpanIncrement
// serve ("an implementation SHOULD use the RTT information measured based
// on the previous COOKIE ECHO/ERROR chunk exchange and SHOULD add no more
// than 1 second beyond the measured RTT"). A packet with another
// Verification Tag or other ports, or without such a cause, reports
// false.
func (e *CookieEchoed) HandleStaleCookie(pkt []byte) (time.Duration, bool) {
	h := chunk.Header(pkt)
	if !h.IsValid() || h.VerificationTag() != e.Established.LocalVerificationTag ||
		h.DestinationPort() != e.Established.LocalPort || h.SourcePort() != e.Established.PeerPort {
		return 0, false
	}
	it := chunk.Chunks(pkt)
	for it.Next() {
		if it.Chunk().Type() != chunk.TypeError {
			continue
		}
		oe, _, err := chunk.ParseOperationError(it.Chunk())
		if err != nil {
			continue
		}
		causes := chunk.Causes(oe.Causes)
		for causes.Next() {
			if c := causes.Cause(); c.Code() == chunk.CauseStaleCookie {
				sc, _, err := chunk.ParseStaleCookie(c)
				if err == nil {
					return time.Duration(sc.Staleness) * time.Microsecond, true
				}
			}
		}
	}
	return 0, false
}
