// Package rdmap implements the Remote Direct Memory Access Protocol, RFC
// 5040, and its extensions of RFC 7306 (Atomic Operations and Immediate
// Data), over package ddp.
//
// The wire side: the RDMAP Control Field and opcodes of RFC 5040 §4.1
// and RFC 7306 §4.1 (opcode.go), the RDMA Read Request Header of §4.4
// (readreq.go), the Terminate Header of §4.8 (terminate.go), and RFC
// 7306's Atomic Operation Request Header (§5.2.1, atomicreq.go), Atomic
// Operation Response Header (§5.2.2, atomicresp.go) and Immediate Data
// Header (§6.2, immediate.go). The verbs side: memory registration
// (memory.go), queue pairs and their work requests (qp.go, wr.go),
// completion queues (cq.go); the send route (send.go) and the receive
// side (recv.go).
//
// RFC 7306: PostAtomic posts FetchAdd and CmpSwap, plain and masked, on
// a peer's 64-bit aligned word with RemoteAtomic rights; the original
// value lands in an 8-octet local buffer. The responder carries Atomic
// Requests out in the order they arrived, among the Read Responses, with
// one hardware atomic operation on the word each (so they are atomic
// across every queue pair of the process). SendWR.WithImm sends Immediate
// Data, WriteWR.WithImm an RDMA Write followed by Immediate Data; the
// receiver's completion is WorkRecvWithImm with the 8 octets in
// Completion.Imm. Outstanding Atomic Requests are bounded per direction
// by QPConfig.AtomicIRD and AtomicORD, which the ULP agrees with its peer
// (RFC 7306 leaves that negotiation to it); QPConfig.NoAtomics and
// NoImmediate make a queue pair without them, as Linux siw is. Opcodes
// 1100b-1111b are reserved: an incoming segment with one of them is
// answered with a Terminate "Unexpected OpCode" (0x0/0x2/0x06).
//
// Known deviations: an RDMA Read Request of 29 to 52 octets is answered
// with Remote Operation Error / Unspecified Error (queue 1's buffers hold
// an Atomic Request, so DDP's "too long" no longer catches it); a Read or
// Atomic Request past its own limit while the other kind's buffers are
// free is refused with DDP's "no buffer available" as if the queues were
// separate.
//
// Nothing in this package is OS-specific: it compiles for js/wasm.
package rdmap
