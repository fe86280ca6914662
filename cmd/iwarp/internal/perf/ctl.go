package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// CtlLen is the length of every control message: a Send of its own. Data
// Sends are told apart by their length or their first octets (the data
// pattern starts 0, 1, 2, 3, never the magic).
const CtlLen = 72

// ctlMagic starts every control message: "IWPF".
const ctlMagic = 0x49575046

// CtlType is a control message's type.
type CtlType uint8

// The control messages. The client speaks first; every message of the
// client but a data Send is answered.
const (
	// CtlHello (client): the operation, the largest size, the receive
	// buffers it wants the server to post (N of BufLen octets), its own
	// region for the server's RDMA Writes (STag, TO), and whether it
	// will compare with the raw transport (FlagRaw).
	CtlHello CtlType = 1
	// CtlAdvert (server): the region to write, read or operate on
	// (STag, TO), the credit window of a Send test (N), the raw
	// listener's port and the token that admits the client there, the
	// server's AtomicIRD.
	CtlAdvert CtlType = 2
	// CtlStart (client): the operation and size of the next test.
	CtlStart CtlType = 3
	// CtlDone (client): the test's operations are all posted.
	CtlDone CtlType = 4
	// CtlAck (server): the answer to a start and a done.
	CtlAck CtlType = 5
	// CtlCredit (server): N more Sends may come.
	CtlCredit CtlType = 6
	// CtlRefuse (server): the hello (or the connection) is refused;
	// Code says why, Asked and Limit give the numbers. The server closes
	// the connection after it.
	CtlRefuse CtlType = 7
)

func (t CtlType) String() string {
	switch t {
	case CtlHello:
		return "hello"
	case CtlAdvert:
		return "advert"
	case CtlStart:
		return "start"
	case CtlDone:
		return "done"
	case CtlAck:
		return "ack"
	case CtlCredit:
		return "credit"
	case CtlRefuse:
		return "refuse"
	}
	return fmt.Sprintf("CtlType(%d)", uint8(t))
}

// Op is the operation measured.
type Op uint8

// The operations.
const (
	OpWrite  Op = 1 // RDMA Write
	OpRead   Op = 2 // RDMA Read
	OpSend   Op = 3 // Send
	OpAtomic Op = 4 // RFC 7306 Atomic Operation (FetchAdd or CmpSwap)
)

// ParseOp parses write, read, send or atomic.
func ParseOp(s string) (Op, error) {
	switch s {
	case "write":
		return OpWrite, nil
	case "read":
		return OpRead, nil
	case "send":
		return OpSend, nil
	case "atomic":
		return OpAtomic, nil
	}
	return 0, fmt.Errorf("--op %q: want write, read, send or atomic", s)
}

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpSend:
		return "send"
	case OpAtomic:
		return "atomic"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

func (o Op) valid() bool { return o >= OpWrite && o <= OpAtomic }

// Title is the operation's name in perftest's header.
func (o Op) Title() string {
	switch o {
	case OpWrite:
		return "RDMA_Write"
	case OpRead:
		return "RDMA_Read"
	case OpSend:
		return "Send"
	case OpAtomic:
		return "Atomic"
	}
	return o.String()
}

// Flags of a hello and a start.
const (
	FlagLat uint8 = 1 << 0 // a latency test
	FlagRaw uint8 = 1 << 1 // the client compares with the raw transport
)

// TokenLen is the length of the token that admits a client to the raw
// listener.
const TokenLen = 16

// Ctl is a control message:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       magic "IWPF"                            |
//	+---------------+---------------+---------------+---------------+
//	|     Type      |      Op       |     Flags     |     Code      |
//	+---------------+---------------+---------------+---------------+
//	|                             Size                              |
//	+---------------------------------------------------------------+
//	|                               N                               |
//	+---------------------------------------------------------------+
//	|                            BufLen                             |
//	+---------------------------------------------------------------+
//	|                             STag                              |
//	+---------------------------------------------------------------+
//	|                          TO (64 bits)                         |
//	+-------------------------------+-------------------------------+
//	|           Raw port            |          Atomic IRD           |
//	+-------------------------------+-------------------------------+
//	|                           reserved                            |
//	+---------------------------------------------------------------+
//	|                    Asked (64 bits, refusals)                  |
//	+---------------------------------------------------------------+
//	|                    Limit (64 bits, refusals)                  |
//	+---------------------------------------------------------------+
//	|                      Token (16 octets)                        |
//	+---------------------------------------------------------------+
//
// All big-endian. A field a type does not use is zero.
type Ctl struct {
	Type      CtlType
	Op        Op
	Flags     uint8
	Code      RefusalCode
	Size      uint32 // hello: the largest message; start: the test's size
	N         uint32 // hello: receive buffers; advert: credit window; credit: Sends
	BufLen    uint32 // hello: the receive buffers' length
	STag      uint32
	TO        uint64
	RawPort   uint16
	AtomicIRD uint16
	Asked     uint64
	Limit     uint64
	Token     [TokenLen]byte
}

// Len returns the encoded length, CtlLen.
func (c *Ctl) Len() int { return CtlLen }

// Append appends the message's CtlLen octets to b.
func (c *Ctl) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, ctlMagic)
	b = append(b, byte(c.Type), byte(c.Op), c.Flags, byte(c.Code))
	b = binary.BigEndian.AppendUint32(b, c.Size)
	b = binary.BigEndian.AppendUint32(b, c.N)
	b = binary.BigEndian.AppendUint32(b, c.BufLen)
	b = binary.BigEndian.AppendUint32(b, c.STag)
	b = binary.BigEndian.AppendUint64(b, c.TO)
	b = binary.BigEndian.AppendUint16(b, c.RawPort)
	b = binary.BigEndian.AppendUint16(b, c.AtomicIRD)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, c.Asked)
	b = binary.BigEndian.AppendUint64(b, c.Limit)
	return append(b, c.Token[:]...)
}

// ErrNotCtl is ParseCtl's error for a message that is not a control
// message (a data Send).
var ErrNotCtl = errors.New("perf: not a control message")

// ParseCtl decodes a control message: exactly CtlLen octets starting with
// the magic, else ErrNotCtl.
func ParseCtl(b []byte) (Ctl, int, error) {
	if len(b) != CtlLen || binary.BigEndian.Uint32(b) != ctlMagic {
		return Ctl{}, 0, ErrNotCtl
	}
	c := Ctl{Type: CtlType(b[4]), Op: Op(b[5]), Flags: b[6], Code: RefusalCode(b[7]),
		Size:      binary.BigEndian.Uint32(b[8:]),
		N:         binary.BigEndian.Uint32(b[12:]),
		BufLen:    binary.BigEndian.Uint32(b[16:]),
		STag:      binary.BigEndian.Uint32(b[20:]),
		TO:        binary.BigEndian.Uint64(b[24:]),
		RawPort:   binary.BigEndian.Uint16(b[32:]),
		AtomicIRD: binary.BigEndian.Uint16(b[34:]),
		Asked:     binary.BigEndian.Uint64(b[40:]),
		Limit:     binary.BigEndian.Uint64(b[48:]),
	}
	copy(c.Token[:], b[56:])
	return c, CtlLen, nil
}
