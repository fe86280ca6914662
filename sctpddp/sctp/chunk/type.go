package chunk

import "fmt"

// Type is an SCTP Chunk Type (RFC 9260 §3.2, Table 1, and the extensions'
// registrations).
type Type uint8

// The chunk types this package parses and builds.
const (
	TypeData             Type = 0    // Payload Data (DATA), RFC 9260 §3.3.1
	TypeInit             Type = 1    // Initiation (INIT), §3.3.2
	TypeInitAck          Type = 2    // Initiation Acknowledgement (INIT ACK), §3.3.3
	TypeSACK             Type = 3    // Selective Acknowledgement (SACK), §3.3.4
	TypeHeartbeat        Type = 4    // Heartbeat Request (HEARTBEAT), §3.3.5
	TypeHeartbeatAck     Type = 5    // Heartbeat Acknowledgement (HEARTBEAT ACK), §3.3.6
	TypeAbort            Type = 6    // Abort (ABORT), §3.3.7
	TypeShutdown         Type = 7    // Shutdown (SHUTDOWN), §3.3.8
	TypeShutdownAck      Type = 8    // Shutdown Acknowledgement (SHUTDOWN ACK), §3.3.9
	TypeError            Type = 9    // Operation Error (ERROR), §3.3.10
	TypeCookieEcho       Type = 10   // State Cookie (COOKIE ECHO), §3.3.11
	TypeCookieAck        Type = 11   // Cookie Acknowledgement (COOKIE ACK), §3.3.12
	TypeECNE             Type = 12   // Reserved for ECN Echo; not parsed here
	TypeCWR              Type = 13   // Reserved for Congestion Window Reduced; not parsed here
	TypeShutdownComplete Type = 14   // Shutdown Complete (SHUTDOWN COMPLETE), §3.3.13
	TypeAuth             Type = 15   // Authentication (AUTH), RFC 4895; not parsed here
	TypeIData            Type = 64   // I-DATA, RFC 8260 §2.1
	TypeASCONFAck        Type = 0x80 // ASCONF-ACK, RFC 5061 §4.1.2
	TypeReconfig         Type = 130  // RE-CONFIG, RFC 6525 §3.1
	TypePad              Type = 132  // PAD, RFC 4820; not parsed here
	TypeForwardTSN       Type = 192  // FORWARD TSN, RFC 3758 §3.2
	TypeASCONF           Type = 0xC1 // ASCONF, RFC 5061 §4.1.1
	TypeIForwardTSN      Type = 194  // I-FORWARD-TSN, RFC 8260 §2.3.1
)

var typeNames = map[Type]string{
	TypeData:             "DATA",
	TypeInit:             "INIT",
	TypeInitAck:          "INIT ACK",
	TypeSACK:             "SACK",
	TypeHeartbeat:        "HEARTBEAT",
	TypeHeartbeatAck:     "HEARTBEAT ACK",
	TypeAbort:            "ABORT",
	TypeShutdown:         "SHUTDOWN",
	TypeShutdownAck:      "SHUTDOWN ACK",
	TypeError:            "ERROR",
	TypeCookieEcho:       "COOKIE ECHO",
	TypeCookieAck:        "COOKIE ACK",
	TypeECNE:             "ECNE",
	TypeCWR:              "CWR",
	TypeShutdownComplete: "SHUTDOWN COMPLETE",
	TypeAuth:             "AUTH",
	TypeIData:            "I-DATA",
	TypeASCONFAck:        "ASCONF-ACK",
	TypeReconfig:         "RE-CONFIG",
	TypePad:              "PAD",
	TypeForwardTSN:       "FORWARD TSN",
	TypeASCONF:           "ASCONF",
	TypeIForwardTSN:      "I-FORWARD-TSN",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("chunk type %d", uint8(t))
}

// Unrecognized returns what a receiver that does not recognise chunk type t
// does with it: RFC 9260 §3.2 encodes the action in the type's
// highest-order 2 bits (Table 2).
func (t Type) Unrecognized() Action { return Action(t >> 6) }

// Action is what RFC 9260 asks a receiver to do with a chunk (§3.2, Table 2)
// or a parameter (§3.2.1, Table 3) of a type it does not recognise. It is
// the type's highest-order 2 bits.
type Action uint8

const (
	// ActionStop (00): stop processing this SCTP packet and discard the
	// unrecognized chunk and all further chunks; for a parameter, stop
	// processing it and do not process any further parameters within this
	// chunk.
	ActionStop Action = 0
	// ActionStopReport (01): as ActionStop, and report the chunk in an
	// ERROR chunk using the Unrecognized Chunk Type error cause, or report
	// the parameter as §3.2.2 says.
	ActionStopReport Action = 1
	// ActionSkip (10): skip this chunk or parameter and continue processing.
	ActionSkip Action = 2
	// ActionSkipReport (11): skip this chunk or parameter and continue
	// processing, but report it as ActionStopReport does.
	ActionSkipReport Action = 3
)

// Stop reports whether processing stops at the unrecognized chunk or
// parameter (00 and 01).
func (a Action) Stop() bool { return a&2 == 0 }

// Report reports whether the unrecognized chunk or parameter is reported to
// the peer (01 and 11).
func (a Action) Report() bool { return a&1 != 0 }

func (a Action) String() string {
	switch a & 3 {
	case ActionStop:
		return "stop and discard"
	case ActionStopReport:
		return "stop, discard and report"
	case ActionSkip:
		return "skip"
	default:
		return "skip and report"
	}
}
