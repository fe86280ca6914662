package perf

import (
	"context"
	"errors"

	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
)

// The raw SCTP baseline moves the same octets over an SCTP stream of an
// association of its own, with the iWARP association's configuration (the
// same DTLS, MTU, UDP buffers, receive window and send-queue cap; an
// unordered stream, as RFC 5043 §10 has DDP use): each message is cut
// into SCTP messages as large as the association's MULPDU, the largest a
// DDP Segment may be, and each goes through sctpddp.Stream with nothing
// but its 2-octet DDP-SSN in front (no DDP header, no placement, no
// RDMAP). pion/sctp computes SCTP's own CRC32c on every packet on both
// sides, for both.

// sctpBufLen is the length of a raw SCTP reader's buffer: more than any
// MULPDU and its DDP-SSN.
const sctpBufLen = 64<<10 + 16

// sctpWrite sends b as one SCTP message.
func sctpWrite(ctx context.Context, s *sctpddp.Stream, b []byte) error {
	_, err := s.WriteSegmentv(ctx, nil, [][]byte{b})
	return err
}

// sctpSend sends count messages of size octets of src's pattern, each cut
// into SCTP messages of at most the MULPDU.
func sctpSend(ctx context.Context, s *sctpddp.Stream, src []byte, size, count int) error {
	chunk := min(s.MULPDU(), len(src))
	for range count {
		for off := 0; off < size; off += chunk {
			if err := sctpWrite(ctx, s, src[:min(chunk, size-off)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// errSCTPMessage is a raw SCTP message that is no payload of ours.
var errSCTPMessage = errors.New("perf: raw SCTP: unexpected message")

// sctpRecv reads SCTP messages until n octets of payload have come. It
// reads without a context (one would cost a timer per message, which the
// iWARP session's receive loop does not pay either): the caller closes
// the association to end it.
func sctpRecv(s *sctpddp.Stream, n int, buf []byte) error {
	for got := 0; got < n; {
		k, ppid, err := s.ReadMessage(context.Background(), buf)
		if err != nil {
			return err
		}
		if ppid != wire.PPIDSegment || k < wire.SSNLen {
			return errSCTPMessage
		}
		got += k - wire.SSNLen
	}
	return nil
}

// sctpRecvHeader reads the raw transfer's header, the stream's first
// message.
func sctpRecvHeader(ctx context.Context, s *sctpddp.Stream, buf []byte) (RawHeader, error) {
	k, ppid, err := s.ReadMessage(ctx, buf)
	if err != nil {
		return RawHeader{}, err
	}
	if ppid != wire.PPIDSegment || k != wire.SSNLen+RawHeaderLen {
		return RawHeader{}, ErrRawHeader
	}
	h, _, err := ParseRawHeader(buf[wire.SSNLen:k])
	return h, err
}
