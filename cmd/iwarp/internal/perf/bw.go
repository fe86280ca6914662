package perf

import (
	"context"
	"errors"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
)

// peakSkip is how many octets of Writes or Sends a bandwidth test moves
// before its peak is measured, and how many any stretch of the peak
// moves: more than loopback's TCP buffers (or an SCTP send queue and
// receive window) hold, and more than a window of Read Responses.
const peakSkip = 16 << 20

type mark struct {
	t time.Time
	n int
}

// bwTest runs one size's bandwidth test: iters operations, or as many as
// fit in duration.
func (c *Client) bwTest(ctx context.Context, size, iters int, duration time.Duration) (Stats, error) {
	if err := c.start(ctx, size); err != nil {
		return Stats{}, err
	}
	limit := c.limit()
	// As perftest does (--cq-mod), only every mod-th operation asks for a
	// completion: it stands for those before it, since a send queue's
	// work requests complete in order. The goroutine that posts then
	// wakes once per mod operations rather than once for each. At most
	// half of those outstanding, so that mod more are posted while as
	// many are still under way.
	mod := max(1, min(c.cfg.CQMod, limit/2))
	gran := max(1, iters/200)
	if duration > 0 {
		gran = 16
	}
	t0 := time.Now()
	deadline := t0.Add(duration)
	marks := []mark{{t0, 0}}
	posted, done := 0, 0
	signaled := 0 // the ID of the last signaled operation posted
	nextMark := gran
	more := func() bool {
		if duration > 0 {
			return time.Now().Before(deadline)
		}
		return posted < iters
	}
	send := c.cfg.Op == OpSend
	// What the window has room for is posted as one batch: the Read
	// Requests (or small Writes and Sends) leave in one gather write.
	postMore := func() error {
		for posted-done < limit && more() && (!send || c.credits > 0) {
			sig := (posted+1)%mod == 0 || (duration == 0 && posted+1 == iters)
			if err := c.post(uint64(posted+1), size, sig); err != nil {
				return err
			}
			posted++
			if sig {
				signaled = posted
			}
			if send {
				c.credits--
			}
		}
		return nil
	}
	for {
		if err := c.qp.PostBatch(postMore); err != nil {
			return Stats{}, err
		}
		// Stop posting and waiting once the last signaled operation has
		// completed; the exchange with the server below covers those
		// after it (a --duration run does not know its last one when it
		// posts it).
		if !more() && done >= signaled {
			break
		}
		cp, err := c.wait(ctx)
		if err != nil {
			return Stats{}, err
		}
		switch {
		case cp.Op == rdmap.WorkRecv:
			if _, isCtl, err := c.handleRecv(cp); err != nil {
				return Stats{}, err
			} else if isCtl {
				return Stats{}, errors.New("unexpected control message during the test")
			}
		case cp.WRID&ctlWRID != 0:
		default:
			done = int(cp.WRID)
			if done >= nextMark {
				nextMark = done + gran
				now := time.Now()
				marks = append(marks, mark{now, done})
				if duration > 0 {
					c.progress(size, float64(now.Sub(t0))/float64(duration))
				} else {
					c.progress(size, float64(done)/float64(iters))
				}
			}
		}
	}
	// Everything has landed once the server answers a message sent after
	// the last operation: it follows their data (and an RDMA Read's
	// Response precedes the answer), so they have all completed.
	if err := c.sendCtl(Ctl{Type: CtlDone}); err != nil {
		return Stats{}, err
	}
	if _, err := c.waitCtl(ctx, CtlAck); err != nil {
		return Stats{}, err
	}
	t1 := time.Now()
	done = posted
	marks = append(marks, mark{t1, done})
	secs := t1.Sub(t0).Seconds()
	st := Stats{Bytes: size, Iterations: done, Seconds: secs}
	st.BWAvg = float64(size) * float64(done) / secs / MB
	st.MsgRate = float64(done) / secs / 1e6
	st.BWPeak = max(peak(marks, size, c.cfg.Op != OpRead), st.BWAvg)
	return st, nil
}

// peak returns the best rate (MB/s) over any stretch of marks of at least
// a twentieth of the run that moves at least peakSkip octets. A Write or
// Send completes once the LLP has taken it, and up to a window of Read
// Responses wait in the sockets to be read at memory speed: shorter
// stretches would measure the socket buffers. With skipStart (Writes and
// Sends) the first peakSkip octets, which complete as fast as the sockets
// take them, start no stretch.
func peak(marks []mark, size int, skipStart bool) float64 {
	first := 0
	if skipStart {
		for first < len(marks) && marks[first].n*size < peakSkip {
			first++
		}
	}
	best := 0.0
	span := marks[len(marks)-1].t.Sub(marks[0].t) / 20
	for i, j := first, first; i < len(marks); i++ {
		for j < len(marks) && (marks[j].t.Sub(marks[i].t) < span || (marks[j].n-marks[i].n)*size < peakSkip) {
			j++
		}
		if j == len(marks) {
			break
		}
		if dt := marks[j].t.Sub(marks[i].t).Seconds(); dt > 0 {
			best = max(best, float64(size)*float64(marks[j].n-marks[i].n)/dt/MB)
		}
	}
	return best
}

func (c *Client) progress(size int, frac float64) {
	if c.cfg.Progress != nil {
		c.cfg.Progress(size, min(frac, 1))
	}
}

// latTest runs one size's latency test: iters round trips, or as many as
// fit in duration. It returns the samples (µs) with their summary. Send
// and Write latencies are half a round trip, Read and Atomic latencies a
// whole one, as perftest's.
func (c *Client) latTest(ctx context.Context, size, iters int, duration time.Duration) (Stats, []float64, error) {
	if err := c.start(ctx, size); err != nil {
		return Stats{}, nil, err
	}
	var samples []float64
	if duration == 0 {
		samples = make([]float64, 0, iters)
	}
	op := c.cfg.Op
	whole := op == OpRead || op == OpAtomic
	t0 := time.Now()
	deadline := t0.Add(duration)
	for i := 0; ; i++ {
		if duration > 0 && !time.Now().Before(deadline) || duration == 0 && i >= iters {
			break
		}
		start := time.Now()
		var err error
		id := uint64(i + 1)
		switch op {
		case OpRead:
			err = c.qp.PostRead(rdmap.ReadWR{ID: id, Local: rdmap.SGE{MR: c.data, Length: uint32(size)}, RemoteSTag: c.remote.STag, RemoteTO: c.remote.TO})
		case OpAtomic:
			err = c.qp.PostAtomic(c.atomicWR(id, true))
		case OpWrite:
			err = c.qp.PostWrite(rdmap.WriteWR{ID: id, SGL: []rdmap.SGE{{MR: c.data, Length: uint32(size)}}, RemoteSTag: c.remote.STag, RemoteTO: c.remote.TO, Unsignaled: true})
			if err == nil {
				err = c.qp.PostSend(rdmap.SendWR{ID: id, Unsignaled: true})
			}
		default:
			err = c.qp.PostSend(rdmap.SendWR{ID: id, SGL: []rdmap.SGE{{MR: c.data, Length: uint32(size)}}, Unsignaled: true})
		}
		if err != nil {
			return Stats{}, nil, err
		}
		for {
			cp, err := c.wait(ctx)
			if err != nil {
				return Stats{}, nil, err
			}
			if whole && cp.WRID == id && cp.Op != rdmap.WorkRecv {
				break
			}
			if !whole && cp.Op == rdmap.WorkRecv {
				if _, isCtl, err := c.handleRecv(cp); err != nil {
					return Stats{}, nil, err
				} else if !isCtl {
					break
				}
			}
		}
		d := float64(time.Since(start).Nanoseconds()) / 1e3
		if !whole {
			d /= 2
		}
		samples = append(samples, d)
		if duration > 0 {
			c.progress(size, float64(time.Since(t0))/float64(duration))
		} else {
			c.progress(size, float64(i+1)/float64(iters))
		}
	}
	return latResult(size, samples, time.Since(t0).Seconds()), samples, nil
}
