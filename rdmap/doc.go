// Package rdmap implements the Remote Direct Memory Access Protocol, RFC
// 5040, over package ddp.
//
// The wire side: the RDMAP Control Field and opcodes of §4.1 (opcode.go),
// the RDMA Read Request Header of §4.4 (readreq.go) and the Terminate
// Header of §4.8 (terminate.go).
//
// Opcodes 1000b-1111b are reserved in RFC 5040; RFC 7306's atomics and
// immediate data are not implemented, so an incoming segment with one of
// them is answered with a Terminate "Unexpected OpCode" (0x0/0x2/0x06).
//
// Nothing in this package is OS-specific: it compiles for js/wasm.
package rdmap
