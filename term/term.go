package term

import "fmt"

// Layer is the 4-bit Layer field of the Terminate Control (RFC 5040 §4.8,
// Figure 9): which layer encountered the error.
type Layer uint8

// The layers of RFC 5040 Figure 9.
const (
	LayerRDMAP Layer = 0x0 // RDMA
	LayerDDP   Layer = 0x1 // DDP
	LayerLLP   Layer = 0x2 // LLP (e.g., MPA)
)

func (l Layer) String() string {
	switch l {
	case LayerRDMAP:
		return "RDMA"
	case LayerDDP:
		return "DDP"
	case LayerLLP:
		return "LLP"
	}
	return fmt.Sprintf("Layer(%#x)", uint8(l))
}

// Error Types (the 4-bit EType field), per layer.
const (
	// RDMAP, RFC 5040 Figure 9.
	ETypeLocalCatastrophic uint8 = 0x0
	ETypeRemoteProtection  uint8 = 0x1
	ETypeRemoteOperation   uint8 = 0x2
	// DDP, RFC 5041 §7.2 (Local Catastrophic is 0x0 there too).
	ETypeTaggedBuffer   uint8 = 0x1
	ETypeUntaggedBuffer uint8 = 0x2
	ETypeDDPReservedLLP uint8 = 0x3
	// MPA, RFC 5044 §8: every MPA error has Error Type 0.
	ETypeMPA uint8 = 0x0
)

// Error is the Terminate triple of RFC 5040 §4.8 as a Go error.
//
// Local is true when this endpoint detected the error, false when the peer
// reported it in a Terminate message. Detail is free text for people; it
// takes no part in comparisons.
type Error struct {
	Layer  Layer
	EType  uint8
	Code   uint8
	Remote bool   // reported by the peer in a Terminate message
	Detail string // optional: what exactly was wrong, for people
}

// Triple returns the error's (Layer, Error Type, Error Code).
func (e *Error) Triple() (Layer, uint8, uint8) { return e.Layer, e.EType, e.Code }

// Local reports whether this endpoint detected the error.
func (e *Error) Local() bool { return !e.Remote }

// Name returns the registry names of RFC 6580 §3, for example
// "Tagged Buffer Error / Invalid Steering Tag".
func (e *Error) Name() string {
	t, c := names(e.Layer, e.EType, e.Code)
	if c == "" {
		return t
	}
	return t + " / " + c
}

func (e *Error) Error() string {
	origin := "local"
	if e.Remote {
		origin = "reported by peer"
	}
	s := fmt.Sprintf("iwarp: %s error %#x/%#x/%#02x: %s (%s)", e.Layer, uint8(e.Layer), e.EType, e.Code, e.Name(), origin)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports whether target is an *Error with the same triple. The Error
// Code is ignored for RDMAP's Local Catastrophic Error, which RFC 5040
// Figure 9 gives no code ("Any value in this field is acceptable").
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if e.Layer != t.Layer || e.EType != t.EType {
		return false
	}
	if e.Layer == LayerRDMAP && e.EType == ETypeLocalCatastrophic {
		return true
	}
	return e.Code == t.Code
}

// With returns a copy of e with Detail set; the sentinels below stay
// untouched.
func (e *Error) With(format string, args ...any) *Error {
	c := *e
	c.Detail = fmt.Sprintf(format, args...)
	return &c
}

// AsRemote returns a copy of e marked as reported by the peer.
func (e *Error) AsRemote() *Error {
	c := *e
	c.Remote = true
	return &c
}

// New returns the error for a triple, for example one decoded from a
// Terminate message.
func New(l Layer, etype, code uint8) *Error {
	return &Error{Layer: l, EType: etype, Code: code}
}

// Known reports whether the triple is one that RFC 6580 registers (or
// RFC 6581 adds for MPA).
func Known(l Layer, etype, code uint8) bool {
	_, c := names(l, etype, code)
	switch {
	case l == LayerRDMAP && etype == ETypeLocalCatastrophic:
		return true
	case l == LayerDDP && etype == ETypeDDPReservedLLP:
		return true
	case l == LayerDDP && etype == 0 && code == 0:
		return true // "0x1/0x0/0x00, Local Catastrophic" (RFC 6580 §3)
	}
	return c != "" && c != "unassigned"
}

// The sentinels: one for every registered triple.
var (
	// RDMAP, RFC 5040 Figure 9. RFC 7306 registers no codes of its own:
	// its errors use these (its §8.2 names RDMAPCatastrophicStream for an
	// Atomic Request at an address that is not 64-bit aligned).
	RDMAPLocalCatastrophic    = &Error{Layer: LayerRDMAP, EType: ETypeLocalCatastrophic}
	RDMAPInvalidSTag          = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x00}
	RDMAPBaseBounds           = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x01}
	RDMAPAccessRights         = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x02}
	RDMAPSTagNotAssociated    = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x03}
	RDMAPTOWrap               = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x04}
	RDMAPProtCannotInvalidate = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0x09}
	RDMAPProtUnspecified      = &Error{Layer: LayerRDMAP, EType: ETypeRemoteProtection, Code: 0xff}
	RDMAPInvalidVersion       = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0x05}
	RDMAPUnexpectedOpcode     = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0x06}
	RDMAPCatastrophicStream   = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0x07}
	RDMAPCatastrophicGlobal   = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0x08}
	RDMAPOpCannotInvalidate   = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0x09}
	RDMAPOpUnspecified        = &Error{Layer: LayerRDMAP, EType: ETypeRemoteOperation, Code: 0xff}

	// DDP, RFC 5041 §7.2.
	DDPLocalCatastrophic      = &Error{Layer: LayerDDP, EType: 0x0, Code: 0x00}
	DDPInvalidSTag            = &Error{Layer: LayerDDP, EType: ETypeTaggedBuffer, Code: 0x00}
	DDPBaseBounds             = &Error{Layer: LayerDDP, EType: ETypeTaggedBuffer, Code: 0x01}
	DDPSTagNotAssociated      = &Error{Layer: LayerDDP, EType: ETypeTaggedBuffer, Code: 0x02}
	DDPTOWrap                 = &Error{Layer: LayerDDP, EType: ETypeTaggedBuffer, Code: 0x03}
	DDPTaggedInvalidVersion   = &Error{Layer: LayerDDP, EType: ETypeTaggedBuffer, Code: 0x04}
	DDPInvalidQN              = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x01}
	DDPNoBuffer               = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x02}
	DDPMSNRange               = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x03}
	DDPInvalidMO              = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x04}
	DDPMessageTooLong         = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x05}
	DDPUntaggedInvalidVersion = &Error{Layer: LayerDDP, EType: ETypeUntaggedBuffer, Code: 0x06}

	// MPA, RFC 5044 §8 and RFC 6581 §9.
	MPAConnectionLost    = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x01}
	MPACRCError          = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x02}
	MPAMarkerMismatch    = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x03}
	MPAInvalidFrame      = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x04}
	MPALocalCatastrophic = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x05}
	MPAInsufficientIRD   = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x06}
	MPANoMatchingRTR     = &Error{Layer: LayerLLP, EType: ETypeMPA, Code: 0x07}
)

// names returns the Error Type name and Error Code name of a triple, as
// RFC 6580 §3 registers them. An unregistered code gives "unassigned".
func names(l Layer, etype, code uint8) (string, string) {
	switch l {
	case LayerRDMAP:
		switch etype {
		case ETypeLocalCatastrophic:
			return "Local Catastrophic Error", ""
		case ETypeRemoteProtection:
			switch code {
			case 0x00:
				return "Remote Protection Error", "Invalid Steering Tag"
			case 0x01:
				return "Remote Protection Error", "Base or bounds violation"
			case 0x02:
				return "Remote Protection Error", "Access rights violation"
			case 0x03:
				return "Remote Protection Error", "Steering Tag not associated with RDMAP Stream"
			case 0x04:
				return "Remote Protection Error", "Tagged Offset wrap"
			case 0x09:
				return "Remote Protection Error", "Steering Tag cannot be Invalidated"
			case 0xff:
				return "Remote Protection Error", "Unspecified Error"
			}
			return "Remote Protection Error", "unassigned"
		case ETypeRemoteOperation:
			switch code {
			case 0x05:
				return "Remote Operation Error", "Invalid RDMAP version"
			case 0x06:
				return "Remote Operation Error", "Unexpected OpCode"
			case 0x07:
				return "Remote Operation Error", "Catastrophic error, localized to RDMAP Stream"
			case 0x08:
				return "Remote Operation Error", "Catastrophic error, global"
			case 0x09:
				return "Remote Operation Error", "Steering Tag cannot be Invalidated"
			case 0xff:
				return "Remote Operation Error", "Unspecified Error"
			}
			return "Remote Operation Error", "unassigned"
		}
	case LayerDDP:
		switch etype {
		case 0x0:
			if code == 0x00 {
				return "Local Catastrophic", ""
			}
			return "Local Catastrophic", "unassigned"
		case ETypeTaggedBuffer:
			switch code {
			case 0x00:
				return "Tagged Buffer Error", "Invalid Steering Tag"
			case 0x01:
				return "Tagged Buffer Error", "Base or bounds violation"
			case 0x02:
				return "Tagged Buffer Error", "Steering Tag not associated with DDP Stream"
			case 0x03:
				return "Tagged Buffer Error", "Tagged Offset wrap"
			case 0x04:
				return "Tagged Buffer Error", "Invalid DDP version"
			}
			return "Tagged Buffer Error", "unassigned"
		case ETypeUntaggedBuffer:
			switch code {
			case 0x01:
				return "Untagged Buffer Error", "Invalid Queue Number"
			case 0x02:
				return "Untagged Buffer Error", "Invalid Message Sequence Number - no buffer available"
			case 0x03:
				return "Untagged Buffer Error", "Invalid Message Sequence Number - Message Sequence Number range is not valid"
			case 0x04:
				return "Untagged Buffer Error", "Invalid Message Offset"
			case 0x05:
				return "Untagged Buffer Error", "DDP Message too long for available buffer"
			case 0x06:
				return "Untagged Buffer Error", "Invalid DDP version"
			}
			return "Untagged Buffer Error", "unassigned"
		case ETypeDDPReservedLLP:
			return "Reserved for use by Lower Layer Protocol", ""
		}
	case LayerLLP:
		if etype == ETypeMPA {
			switch code {
			case 0x01:
				return "MPA Error", "TCP connection closed, terminated, or lost"
			case 0x02:
				return "MPA Error", "MPA CRC Error"
			case 0x03:
				return "MPA Error", "MPA Marker and ULPDU Length field mismatch"
			case 0x04:
				return "MPA Error", "Invalid MPA Request Frame or MPA Response Frame"
			case 0x05:
				return "MPA Error", "Local catastrophic error"
			case 0x06:
				return "MPA Error", "Insufficient IRD resources"
			case 0x07:
				return "MPA Error", "No matching RTR option"
			}
			return "MPA Error", "unassigned"
		}
	}
	return fmt.Sprintf("Error Type %#x", etype), "unassigned"
}
