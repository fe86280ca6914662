// Package batchconn is a net.PacketConn over a *net.UDPConn that moves
// datagrams in batches: one system call for many datagrams where the
// kernel allows it. It sits beneath pion/dtls, which calls ReadFrom and
// WriteTo once a datagram: the Conn answers those calls from a batch it
// received with one call, and sends in one call the datagrams its user
// wrote between Cork and Flush. The socket may be connected (as a Dial
// makes it, so that the kernel's ICMP port unreachable comes back as
// ECONNREFUSED): then every datagram goes to its peer, sent with no
// destination, and WriteTo takes a nil address or the peer's.
//
//	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
//	if err != nil {
//		return err
//	}
//	pc, err := batchconn.New(uc, nil)
//	if err != nil {
//		return err
//	}
//	conn, err := dtls.ClientWithOptions(pc, raddr, opts...)
//	...
//	pc.Cork()
//	for _, m := range burst {
//		conn.Write(m) // one DTLS record, held by pc
//	}
//	err = pc.Flush() // all of them, in one system call or a few
//
// # Buffers
//
// ReadFrom copies each datagram into the caller's buffer, and WriteTo
// copies p before it returns: no buffer passed to either is kept, and
// the caller may reuse it at once. Next hands out a datagram where the Conn
// received it, without that copy, valid until the next Next or ReadFrom. The Conn's own buffers are allocated
// by New (to receive) and by the first WriteTo after Cork (to hold);
// in steady state ReadFrom and WriteTo allocate nothing. The address
// ReadFrom returns may be returned again by later calls for datagrams
// from the same source: it must not be modified. To receive, a Conn
// holds Config.ReadBatch × Config.MaxDatagram octets (256 KiB by
// default), or ReadBatch × 64 KiB with GRO (512 KiB); to hold datagrams
// between Cork and Flush, Config.WriteBatch × MaxDatagram (512 KiB),
// once it first holds one.
//
// # Reading
//
// On Linux, ReadFrom receives up to Config.ReadBatch datagrams with one
// recvmmsg and hands them out one a call, in order; it calls recvmmsg
// again only once they are all handed out. With UDP_GRO (Linux 5.0 and
// later; on unless Config.DisableGRO), the kernel delivers the
// datagrams of one flow that it coalesced as one super-datagram with a
// control message giving their size, and ReadFrom splits it again. A
// datagram longer than the caller's buffer is truncated to it, the rest
// discarded, as a plain ReadFrom does; so is one longer than the
// receive slot (Config.MaxDatagram, 64 KiB with GRO). The read deadline
// and Close hold for datagrams received but not yet handed out as they
// do for the socket: past the deadline ReadFrom fails (and keeps them),
// once closed it returns net.ErrClosed.
//
// # Writing
//
// Outside Cork and Flush, WriteTo sends at once, as the *net.UDPConn
// would. Between them, it copies each datagram into a buffer of the
// Conn, and Flush (or a WriteTo that finds Config.WriteBatch datagrams
// held) sends them in order with sendmmsg. With UDP_SEGMENT (GSO, Linux
// 4.18 and later; on unless Config.DisableGSO), a run of datagrams of
// one size to one address (the last may be shorter) goes as one message
// that the kernel segments, up to 64 segments and 64 KiB a message. If
// the kernel refuses a GSO message (EIO where the route's device cannot
// checksum, EINVAL where it will not segment), Flush sends those
// datagrams again without GSO and the Conn uses it no more. A full send
// buffer (EAGAIN) makes Flush wait, as WriteTo would, until the write
// deadline; a datagram refused otherwise (ENOBUFS, an unreachable
// address) is dropped and the rest sent, and Flush returns the first
// such error. Corks nest and may come from several goroutines: holding
// goes on until there have been as many Flushes as Corks, and every
// Flush sends all that is held. Close drops what is held.
//
// # Other systems
//
// Elsewhere (and in js/wasm) Conn passes every call through to the
// *net.UDPConn: a datagram a system call, Cork and Flush doing nothing.
// Features reports what is in use.
package batchconn
