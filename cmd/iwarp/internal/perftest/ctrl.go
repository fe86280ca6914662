package perftest

import (
	"context"
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/rdmap"
)

// ctrl is the control connection's queue pair as perftest uses it
// (create_comm_struct: an RC queue pair of depth 1 each way, a 56-octet
// buffer): each message is one Send, answered by one Send, in lock step.
// The client writes first and then reads (ctx_xchg_data_rdma,
// ctx_hand_shake with servername set); the server reads first. perftest
// posts one receive before it connects and reposts it right after each
// message it reads, before it answers, so a peer never sends two messages
// in a row.
type ctrl struct {
	qp       *rdmap.QueuePair
	scq, rcq *rdmap.CompletionQueue
	sbuf     *rdmap.MemoryRegion
	rbuf     *rdmap.MemoryRegion
	client   bool
	n        int // exchanges done, for messages
}

// newCtrl makes the control queue pair and posts its receive: before the
// connection starts, as perftest does (post_one_recv_wqe before
// rdma_connect and rdma_accept).
func newCtrl(dev *rdmap.Device, pd *rdmap.ProtectionDomain, client bool) (*ctrl, error) {
	c := &ctrl{scq: dev.NewCompletionQueue(4), rcq: dev.NewCompletionQueue(4), client: client}
	var err error
	if c.qp, err = pd.NewQueuePair(rdmap.QPConfig{SendCQ: c.scq, RecvCQ: c.rcq, SendDepth: 2, RecvDepth: 2, IRD: 1, ORD: 1}); err != nil {
		return nil, err
	}
	// rdma_cm's conn_param is zero for the control connection: no RDMA
	// Reads either way.
	if err := c.qp.SetReadLimits(0, 0); err != nil {
		return nil, err
	}
	if c.sbuf, err = pd.RegisterMemory(make([]byte, DestLen), 0, 0); err != nil {
		return nil, err
	}
	if c.rbuf, err = pd.RegisterMemory(make([]byte, DestLen), 0, rdmap.LocalWrite); err != nil {
		return nil, err
	}
	return c, c.post()
}

func (c *ctrl) post() error {
	return c.qp.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: c.rbuf, Length: DestLen}}})
}

// ErrProtocol is wrapped by the errors of a control exchange whose message
// is not the one due: the two ends do not run the same test.
var ErrProtocol = errors.New("perftest: the peer's control message is not the one due")

// exchange sends msg and returns the peer's message of the same step,
// which must be want octets long; what names the step in errors.
func (c *ctrl) exchange(ctx context.Context, what string, msg []byte, want int) ([]byte, error) {
	c.n++
	if c.client {
		if err := c.send(ctx, what, msg); err != nil {
			return nil, err
		}
		return c.recv(ctx, what, want)
	}
	got, err := c.recv(ctx, what, want)
	if err != nil {
		return nil, err
	}
	return got, c.send(ctx, what, msg)
}

func (c *ctrl) send(ctx context.Context, what string, msg []byte) error {
	copy(c.sbuf.Bytes(), msg)
	if err := c.qp.PostSend(rdmap.SendWR{ID: 2, SGL: []rdmap.SGE{{MR: c.sbuf, Length: uint32(len(msg))}}, Inline: true}); err != nil {
		return c.fail(what, "sending", err)
	}
	cp, err := c.scq.Wait(ctx)
	if err != nil {
		return c.fail(what, "sending", err)
	}
	if cp.Status != rdmap.StatusSuccess {
		return c.fail(what, "sending", fmt.Errorf("%v %v", cp.Status, cp.Err))
	}
	return nil
}

func (c *ctrl) recv(ctx context.Context, what string, want int) ([]byte, error) {
	cp, err := c.rcq.Wait(ctx)
	if err != nil {
		return nil, c.fail(what, "receiving", err)
	}
	if cp.Status != rdmap.StatusSuccess {
		return nil, c.fail(what, "receiving", fmt.Errorf("%v %v", cp.Status, cp.Err))
	}
	got := append([]byte(nil), c.rbuf.Bytes()[:cp.ByteLen]...)
	// The receive for the next message. A peer that has sent its last
	// message may have closed the connection already: then this fails,
	// and so will the next exchange, if there is one.
	c.post()
	if len(got) != want {
		return got, fmt.Errorf("%w: control message %d (%s): the peer sent %d octets, %d were due: are both ends running the same test with the same options?",
			ErrProtocol, c.n, what, len(got), want)
	}
	return got, nil
}

// fail describes an exchange that could not complete.
func (c *ctrl) fail(what, doing string, err error) error {
	if qerr := c.qp.Err(); qerr != nil {
		if errors.Is(qerr, rdmap.ErrDisconnected) {
			return fmt.Errorf("perftest: control message %d (%s): the peer closed the control connection while %s (%v): %w", c.n, what, doing, err, qerr)
		}
		return fmt.Errorf("perftest: control message %d (%s), %s (%v): %w", c.n, what, doing, err, qerr)
	}
	return fmt.Errorf("perftest: control message %d (%s), %s: %w", c.n, what, doing, err)
}
