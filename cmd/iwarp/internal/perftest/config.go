package perftest

import (
	"fmt"
	"strings"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
)

// Test is one of perftest's programs.
type Test int

// The tests. Atomics are not among them: iWARP has none (RFC 7306 is not
// implemented, and siw reports ATOMIC_NONE).
const (
	WriteBW  Test = iota + 1 // ib_write_bw
	ReadBW                   // ib_read_bw
	SendBW                   // ib_send_bw
	WriteLat                 // ib_write_lat
	ReadLat                  // ib_read_lat
	SendLat                  // ib_send_lat
)

var testNames = map[Test]string{
	WriteBW: "ib_write_bw", ReadBW: "ib_read_bw", SendBW: "ib_send_bw",
	WriteLat: "ib_write_lat", ReadLat: "ib_read_lat", SendLat: "ib_send_lat",
}

// Tests lists every test.
var Tests = []Test{WriteBW, ReadBW, SendBW, WriteLat, ReadLat, SendLat}

func (t Test) String() string {
	if s, ok := testNames[t]; ok {
		return s
	}
	return fmt.Sprintf("Test(%d)", int(t))
}

// ParseTest parses a test's name: "ib_write_bw", "write_bw" or
// "write-bw".
func ParseTest(s string) (Test, error) {
	n := strings.ReplaceAll(strings.TrimPrefix(s, "ib_"), "-", "_")
	for t, name := range testNames {
		if name == "ib_"+n {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown perftest test %q: want write_bw, read_bw, send_bw, write_lat, read_lat or send_lat", s)
}

// Latency reports whether t is a latency test.
func (t Test) Latency() bool { return t == WriteLat || t == ReadLat || t == SendLat }

// Op returns the test's operation: "write", "read" or "send".
func (t Test) Op() string {
	switch t {
	case WriteBW, WriteLat:
		return "write"
	case ReadBW, ReadLat:
		return "read"
	}
	return "send"
}

// reads reports whether the test's client sends RDMA Reads: then both
// connections' rdma_cm parameters ask for out_reads (responder_resources
// and initiator_depth) on the data connection.
func (t Test) reads() bool { return t == ReadBW || t == ReadLat }

// Defaults, as perftest_parameters.h has them.
const (
	DefaultPort        = 18515 // DEF_PORT
	DefaultSizeBW      = 65536 // DEF_SIZE_BW
	DefaultSizeLat     = 2     // DEF_SIZE_LAT
	DefaultIters       = 1000  // DEF_ITERS
	DefaultItersWB     = 5000  // DEF_ITERS_WB: ib_write_bw
	DefaultTxDepthBW   = 128   // DEF_TX_BW
	DefaultTxDepthLat  = 1     // DEF_TX_LAT
	DefaultRxDepthSend = 512   // DEF_RX_SEND
	DefaultCQMod       = 100   // DEF_CQ_MOD
	DefaultCycleBuffer = 4096  // sysconf(_SC_PAGESIZE) on x86
	DefaultCacheLine   = 64    // DEF_CACHE_LINE_SIZE
	// DefaultMTU is the enum ibv_mtu this end reports: 3 (1024 octets),
	// what Linux siw reports for an Ethernet MTU of 1500.
	DefaultMTU = 3
	// DefaultOutReads is the outstanding RDMA Reads of the read tests:
	// perftest asks the device (max_qp_rd_atom); siw's is 128.
	DefaultOutReads = 128
	// MaxSize is perftest's MAX_SIZE (8 MiB).
	MaxSize = 8 << 20
	// MinIters is perftest's MIN_ITER.
	MinIters = 5
	// DefaultMemoryBudget bounds what one session's peer can make a
	// server hold (see Config.MemoryBudget).
	DefaultMemoryBudget = 256 << 20
	// DefaultFirstFPDUDelay is the pause a client makes after each MPA
	// Reply before its first FPDU, for Linux siw's accept race.
	DefaultFirstFPDUDelay = 100 * time.Millisecond
)

// Config describes one session. Like perftest's, both ends must be given
// the same test and the same test parameters (size, iterations, depths):
// perftest exchanges none of them but the cycle buffer and the cache line
// size.
type Config struct {
	Test Test
	// Size is the message size (-s). 0: 65536 for bandwidth, 2 for latency.
	Size int
	// Iters is the number of iterations (-n). 0: 5000 for ib_write_bw,
	// 1000 for the others.
	Iters int
	// TxDepth is the send queue depth of bandwidth tests (-t): the
	// operations a client keeps outstanding. 0: 128, and at most Iters.
	TxDepth int
	// RxDepth is the receive queue depth of the Send tests (-r). 0: 512,
	// and at most Iters. ib_send_bw's receiver grants credits every
	// RxDepth/3 receives, and its sender keeps fewer than RxDepth Sends
	// beyond the last credit: both ends need the same value.
	RxDepth int
	// CQMod is the CQ moderation of bandwidth tests (-Q): a completion is
	// asked for every CQMod operations. 0: 100; at most TxDepth; 1 for
	// messages over 8 KiB (perftest disables moderation there unless
	// asked).
	CQMod int
	// OutReads is the outstanding RDMA Reads of the read tests (-o): the
	// IRD and ORD the data connection asks for. 0: 128 (siw's maximum).
	OutReads int
	// CycleBuffer and CacheLine are what check_sys_data sends (0: 4096
	// and 64). Each side takes the larger of its own and the peer's: RDMA
	// Writes and Reads step through the cycle buffer in cache lines.
	CycleBuffer, CacheLine int
	// MTU is the enum ibv_mtu check_mtu sends (0: 3, 1024 octets). It is
	// only reported: iWARP's MPA does its own segmentation.
	MTU int

	// MemoryBudget bounds the memory a server registers for one session
	// (0: DefaultMemoryBudget, 256 MiB): the peer's cycle buffer decides
	// the size of the region it writes or reads, and the server's receive
	// buffers are RxDepth × Size. A session that would need more is
	// refused: the server closes the control connection (the perftest
	// client then reports a failed exchange) and returns an error saying
	// why. A client applies the same budget to itself.
	MemoryBudget int64
	// StepTimeout bounds each control exchange and connection set-up (0:
	// 30 s); RunTimeout bounds the wait for the peer's end of the data
	// transfer (0: 10 min).
	StepTimeout, RunTimeout time.Duration

	// MPA is the template of the client's MPA configuration (each
	// connection gets a copy; perftest's clients, as siw, connect
	// client-server, without an RTR). Nil: revision 2 with CRCs.
	// ClientServer is always set. The server's is its listener's.
	MPA *mpa.Config
	// FirstFPDUDelay is set in each client connection's mpa.Config
	// unless MPA sets one: 0 means DefaultFirstFPDUDelay; negative
	// means none.
	FirstFPDUDelay time.Duration
	// DataRetries is how often a client tries the data connection
	// (perftest's rdma_cm_client_connection tries 10 times, 100 ms
	// apart: the server listens again only after the first exchanges).
	// 0: 10.
	DataRetries int

	// Pattern makes this end fill the memory the peer reads or that its
	// own Writes and Sends come from with a known pattern (octet at
	// offset i of its buffer: i mod 251), and check every octet that
	// arrives against it: for tests between two Go peers. perftest fills
	// its buffers with random octets, so leave it off against perftest.
	Pattern bool
}

// Check reports whether c is valid, as Dial and Serve check it: a test,
// parameters in perftest's ranges, and a memory need within the budget.
func (c Config) Check() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns c with the zero fields set and checks it.
func (c Config) withDefaults() (Config, error) {
	if _, ok := testNames[c.Test]; !ok {
		return c, fmt.Errorf("perftest: no test given")
	}
	if c.Size == 0 {
		c.Size = DefaultSizeBW
		if c.Test.Latency() {
			c.Size = DefaultSizeLat
		}
	}
	if c.Iters == 0 {
		c.Iters = DefaultIters
		if c.Test == WriteBW {
			c.Iters = DefaultItersWB
		}
	}
	if c.Size < 1 || c.Size > MaxSize {
		return c, fmt.Errorf("perftest: size %d: want 1 to %d", c.Size, MaxSize)
	}
	if c.Iters < MinIters || c.Iters > 100000000 {
		return c, fmt.Errorf("perftest: %d iterations: want %d to 100000000", c.Iters, MinIters)
	}
	if c.TxDepth == 0 {
		c.TxDepth = DefaultTxDepthBW
		if c.Test.Latency() {
			c.TxDepth = DefaultTxDepthLat
		}
	}
	if c.TxDepth < 1 || c.TxDepth > 15000 {
		return c, fmt.Errorf("perftest: tx depth %d: want 1 to 15000", c.TxDepth)
	}
	c.TxDepth = min(c.TxDepth, c.Iters) // force_dependecies
	if c.RxDepth == 0 {
		c.RxDepth = DefaultRxDepthSend
	}
	if c.RxDepth < 1 || c.RxDepth > 16384 {
		return c, fmt.Errorf("perftest: rx depth %d: want 1 to 16384", c.RxDepth)
	}
	c.RxDepth = min(c.RxDepth, c.Iters)
	if c.Test == SendBW && c.RxDepth < 3 {
		// perftest divides by RxDepth/3 (ctx_alloc_credit).
		return c, fmt.Errorf("perftest: ib_send_bw over iWARP needs an rx depth of 3 or more")
	}
	if c.CQMod == 0 {
		c.CQMod = DefaultCQMod
		if c.Size > 8192 { // MSG_SIZE_CQ_MOD_LIMIT: DISABLED_CQ_MOD_VALUE
			c.CQMod = 1
		}
	}
	if c.CQMod < 1 || c.CQMod > 1024 {
		return c, fmt.Errorf("perftest: cq moderation %d: want 1 to 1024", c.CQMod)
	}
	c.CQMod = min(c.CQMod, c.TxDepth)
	if c.OutReads == 0 {
		c.OutReads = DefaultOutReads
	}
	if c.OutReads < 1 || c.OutReads > 16383 {
		return c, fmt.Errorf("perftest: %d outstanding reads: want 1 to 16383", c.OutReads)
	}
	if c.CycleBuffer == 0 {
		c.CycleBuffer = DefaultCycleBuffer
	}
	if c.CacheLine == 0 {
		c.CacheLine = DefaultCacheLine
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.MTU < 1 || c.MTU > 5 {
		return c, fmt.Errorf("perftest: MTU enum %d: want 1 (256) to 5 (4096)", c.MTU)
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = 30 * time.Second
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = 10 * time.Minute
	}
	if c.DataRetries == 0 {
		c.DataRetries = 10
	}
	if c.FirstFPDUDelay == 0 {
		c.FirstFPDUDelay = DefaultFirstFPDUDelay
	}
	if err := checkGeometry(c.CycleBuffer, c.CacheLine); err != nil {
		return c, fmt.Errorf("perftest: %v", err)
	}
	// What this end's own parameters need, whatever the peer says.
	if need := c.need(c.CycleBuffer, false); need > c.MemoryBudget {
		return c, fmt.Errorf("%w: %s with %d-octet messages and an rx depth of %d needs %d octets, the budget is %d",
			ErrBudget, c.Test, c.Size, c.RxDepth, need, c.MemoryBudget)
	}
	return c, nil
}

// checkGeometry checks a cycle buffer and a cache line size, this end's
// or the peer's.
func checkGeometry(cycle, line int) error {
	if cycle < 64 || cycle&(cycle-1) != 0 {
		return fmt.Errorf("cycle buffer %d: want a power of two of 64 or more (a page size)", cycle)
	}
	if line < 1 || line > cycle || line&(line-1) != 0 {
		return fmt.Errorf("cache line size %d: want a power of two up to the cycle buffer %d", line, cycle)
	}
	return nil
}

// regionLen is the length of the region the peer writes or reads:
// perftest's BUFF_SIZE(size, cycle_buffer).
func regionLen(size, cycle int) int { return max(size, cycle) }

// inc is perftest's INC(size, cache_line_size): how far each operation
// moves the addresses when the messages are small.
func inc(size, line int) int {
	if size > line {
		return (size + line - 1) / line * line
	}
	return line
}

// addrs returns the offset into the region of operation k (counting from
// 0), as increase_rem_addr and increase_loc_addr step them: by inc while
// the size is at most half the cycle buffer, wrapping to the start every
// cycle/inc operations; always 0 for larger sizes.
func offset(k uint64, size, cycle, line int) uint64 {
	if size > cycle/2 {
		return 0
	}
	step := uint64(inc(size, line))
	per := uint64(cycle) / step
	return (k % per) * step
}
