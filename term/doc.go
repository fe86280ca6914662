// Package term holds the error model of the iWARP suite: the Terminate
// triple (Layer, Error Type, Error Code) that RDMAP carries in its
// Terminate message, and the one Go error type, *Error, that every layer
// of this module uses to report it.
//
// The tables live here and nowhere else:
//
//   - RFC 5040 §4.8 Figure 9 (RDMAP: Layer 0),
//   - RFC 5041 §7.2 (DDP: Layer 1),
//   - RFC 5044 §8 and RFC 6581 §9 (MPA, the LLP: Layer 2),
//
// as registered by RFC 6580 §3. String() gives the registry's names.
//
// An *Error records whether it was detected by this endpoint (Local) or
// reported by the peer in a Terminate message (Remote). errors.Is matches
// on the triple alone, so
//
//	errors.Is(err, term.DDPInvalidSTag)
//
// is true both for a locally detected invalid STag and for one the peer
// reported.
package term
