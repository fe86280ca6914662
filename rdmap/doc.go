// Package rdmap is the verbs interface of this module: it lets a program
// register memory, post RDMA Writes, RDMA Reads, Sends, Receives and
// Atomic Operations on a queue pair, and collect their completions, as
// libibverbs does. Underneath it implements the Remote Direct Memory
// Access Protocol (RFC 5040) and its extensions of RFC 7306 over package
// ddp; a queue pair is connected to its peer by package iwarp (by
// address), or by mpa (TCP) or sctpddp (SCTP) directly.
//
//	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
//	pd := dev.NewProtectionDomain()
//	cq := dev.NewCompletionQueue(64)
//	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: cq, RecvCQ: cq})
//	...
//	conn, err := iwarp.Dial(ctx, "tcp://server:4791", qp, nil)
//	remote, _, err := rdmap.ParseRemoteBuffer(conn.PeerPrivateData())
//
//	src, err := pd.RegisterMemory(data, 0, 0)
//	err = qp.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 4096}},
//		RemoteSTag: remote.STag, RemoteTO: remote.TO})
//	c, err := cq.Wait(ctx) // c.Op RDMA_WRITE, c.Status SUCCESS
//
// # The objects
//
// A Device owns the STags and the limits; a ProtectionDomain groups the
// memory regions and queue pairs that may be used together (RFC 5042
// §2.2.4) and can bound what its peers make it hold (SetLimits).
// RegisterMemory gives a buffer an STag and a Tagged Offset range, with
// access rights (RemoteWrite, RemoteRead, RemoteAtomic, LocalWrite);
// MemoryRegion.Remote describes it for the peer as a RemoteBuffer, whose
// 16-octet form travels in private data or in a Send. An STag is usable
// on every queue pair of its domain (RFC 5041 §8.2's Protection Domain
// association), except a memory window bound to one queue pair with
// QueuePair.BindWindow (§8.2's DDP Stream association; MemoryRegion's
// BindWindow binds one for the domain). A QueuePair is one
// RDMAP stream: work requests posted on its send queue (PostWrite,
// PostRead, PostSend, PostAtomic, PostInvalidate, PostBatch for several
// at once) and receive buffers on its receive queue (PostRecv, or a
// SharedReceiveQueue). Each finished work request yields a Completion on
// a CompletionQueue (Wait, Poll, Arm and Notify).
//
// A queue pair starts IDLE; receive buffers may be posted then. It runs
// once connected, until Close, the peer's disconnect, a Terminate or the
// loss of the transport: Err and Terminated say which (ErrDisconnected,
// an error wrapping ErrLLPLost, or a *term.Error with the Terminate's
// triple), and the Device's event handler hears it. Outstanding work
// then completes with WR_FLUSH_ERR.
//
// RDMA Reads and Atomic Operations outstanding are bounded by the ORD,
// those accepted from the peer by the IRD (SetReadLimits,
// SetAtomicLimits); over MPA and SCTP the IRD and ORD are negotiated at
// connection set-up (RFC 6581).
//
// # The protocol
//
// RFC 5040: the RDMAP Control Field and opcodes (§4.1), the RDMA Read
// Request Header (§4.4), the Terminate Header and its error triples
// (§4.8, package term), the ordering and completion rules of §5.5, the
// error handling of §7. RFC 7306: Atomic Operations (FetchAdd and CmpSwap,
// plain and masked, on a 64-bit aligned word; the responder carries each
// out with one hardware atomic instruction, so operations are atomic
// across every queue pair of the process, and with the program's own
// sync/atomic operations on MemoryRegion.Word, which §5.4 makes
// OPTIONAL) and Immediate Data (8 octets
// that complete a receive at the peer; Completion.Imm). RFC 7306 leaves
// the agreement on the extensions and on the atomic limits to the ULP;
// QPConfig.NoAtomics and NoImmediate make a queue pair without them, as
// Linux siw is. Opcodes 1100b-1111b are reserved: an incoming segment
// with one of them is answered with a Terminate "Unexpected OpCode"
// (0x0/0x2/0x06).
//
// Terminate messages are decoded as RFC 5040 §4.8 lays them out. Linux
// siw sends its Layer and Error Type nibbles swapped; they are not read
// otherwise here (iwarp dump notes such a Terminate).
//
// # Known deviations
//
// An RDMA Read Request of 29 to 52 octets is answered with Remote
// Operation Error / Unspecified Error (queue 1's buffers hold an Atomic
// Request, so DDP's "too long" no longer catches it); a Read or Atomic
// Request past its own limit while the other kind's buffers are free is
// refused with DDP's "no buffer available" as if the queues were
// separate.
//
// Nothing in this package is OS-specific: it compiles for js/wasm.
package rdmap
