package llp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/pion/dtls/v3"

	"github.com/iwarpgo/iwarp/sctpddp/batchconn"
)

// DTLSGCMBatched is DTLSGCM with its records sent as sctp:// sends its
// packets: through a batchconn.Conn on a connected socket, corked around
// each Send's records, so that they leave in sendmmsg calls with UDP
// GSO. The receiver reads as DTLSGCM's does, a datagram a system call:
// how far batched sends alone lift pion/dtls's ceiling.
func DTLSGCMBatched(mtu int) Transport {
	t := DTLSGCM(mtu)
	t.Name += "-batched"
	size := recordSize(mtu)
	t.About = fmt.Sprintf("raw pion/dtls records of %d octets, PSK (AES-GCM), sent in batches (sendmmsg, GSO)", size)
	t.Dial = func(ctx context.Context, addr string, sec *Security) (Sender, error) {
		c, bc, err := dialDTLSBatched(ctx, addr, dtlsOptions(sec, true))
		if err != nil {
			return nil, err
		}
		return &dtlsSender{c: c, buf: make([]byte, size), batch: bc}, nil
	}
	return t
}

// dialDTLSBatched runs a DTLS handshake over a batchconn.Conn on a UDP
// socket connected to addr, with sctpddp's buffers.
func dialDTLSBatched(ctx context.Context, addr string, opts []dtls.Option) (*dtls.Conn, *batchconn.Conn, error) {
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, nil, err
	}
	uc, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil, nil, err
	}
	uc.SetReadBuffer(UDPBufferSize)
	uc.SetWriteBuffer(UDPBufferSize)
	bc, err := batchconn.New(uc, nil)
	if err != nil {
		uc.Close()
		return nil, nil, err
	}
	c, err := dtls.ClientWithOptions(bc, ra, clientOptions(opts)...)
	if err != nil {
		bc.Close()
		return nil, nil, err
	}
	if err := c.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, bc, nil
}

// flushBatch sends what a batched Send held; a full socket buffer
// (ENOBUFS) loses records, as the network would.
func flushBatch(bc *batchconn.Conn) error {
	if err := bc.Flush(); err != nil && !errors.Is(err, syscall.ENOBUFS) {
		return err
	}
	return nil
}
