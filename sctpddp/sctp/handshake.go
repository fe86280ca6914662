package sctp

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
