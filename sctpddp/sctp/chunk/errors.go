package chunk

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a parser returns wraps exactly one of them, so
// that the association can tell malformed input apart with errors.Is and act
// as RFC 9260 asks for each case.
var (
	// ErrTruncated reports that the buffer ends before a field, a length or
	// the padding that a length field promises (RFC 9260 §3.2: the sender
	// MUST pad every chunk to a multiple of 4 bytes).
	ErrTruncated = errors.New("truncated")

	// ErrLength reports a length field below the minimum for its type, one
	// that does not match the fixed length its type has, or one whose
	// variable part is not a whole number of entries.
	ErrLength = errors.New("invalid length field")

	// ErrWrongType reports that a ParseX function was handed a chunk,
	// parameter or error cause of another type.
	ErrWrongType = errors.New("wrong type")

	// ErrChecksum reports a CRC32c mismatch (RFC 9260 §6.8: the receiver
	// MUST treat the packet as an invalid SCTP packet; by default it
	// silently discards it).
	ErrChecksum = errors.New("CRC32c checksum mismatch")

	// ErrNoUserData reports a DATA or I-DATA chunk with no user data. RFC
	// 9260 §3.3.1 says L MUST be greater than 0, and §6.2 has the receiver
	// abort with a No User Data error cause (§3.3.10.9) carrying the TSN,
	// so the parser returns the chunk's header fields with this error.
	ErrNoUserData = errors.New("DATA chunk without user data")

	// ErrParamCount reports a chunk whose parameter list has too few or too
	// many parameters for its type (a RE-CONFIG chunk holds one or two, an
	// ASCONF chunk starts with an Address Parameter).
	ErrParamCount = errors.New("wrong parameters for chunk type")

	// The checks of (Init).Check and (InitAck).Check on the fixed fields of
	// INIT and INIT ACK (RFC 9260 §3.3.2 and §3.3.3).
	ErrZeroInitiateTag = errors.New("Initiate Tag is 0")
	ErrSmallARwnd      = errors.New("a_rwnd below 1500")
	ErrZeroStreams     = errors.New("number of streams is 0")
)

// ChunkError is the error of a malformed chunk. Err is one of the sentinel
// errors above; errors.Is sees through ChunkError to it.
type ChunkError struct {
	Type   Type  // the Chunk Type, when the chunk header could be read
	Offset int   // where the chunk starts in the buffer that was parsed
	Err    error // a sentinel error
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("sctp: %v chunk at offset %d: %v", e.Type, e.Offset, e.Err)
}

func (e *ChunkError) Unwrap() error { return e.Err }

// ParamError is the error of a malformed parameter (RFC 9260 §3.2.1).
type ParamError struct {
	Type   ParamType // the Parameter Type, when it could be read
	Offset int       // where the parameter starts in the buffer that was parsed
	Err    error     // a sentinel error
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("sctp: %v parameter at offset %d: %v", e.Type, e.Offset, e.Err)
}

func (e *ParamError) Unwrap() error { return e.Err }

// CauseError is the error of a malformed error cause (RFC 9260 §3.3.10).
type CauseError struct {
	Code   CauseCode // the Cause Code, when it could be read
	Offset int       // where the cause starts in the buffer that was parsed
	Err    error     // a sentinel error
}

func (e *CauseError) Error() string {
	return fmt.Sprintf("sctp: %v error cause at offset %d: %v", e.Code, e.Offset, e.Err)
}

func (e *CauseError) Unwrap() error { return e.Err }

func chunkErr(t Type, off int, err error) error {
	return &ChunkError{Type: t, Offset: off, Err: err}
}

func paramErr(t ParamType, off int, err error) error {
	return &ParamError{Type: t, Offset: off, Err: err}
}

func causeErr(c CauseCode, off int, err error) error {
	return &CauseError{Code: c, Offset: off, Err: err}
}
