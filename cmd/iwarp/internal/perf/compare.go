package perf

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// CompareRounds is how many rounds a comparison alternates between iWARP
// and the raw transport. The ratio is the median of the rounds' ratios:
// on a shared machine whose speed drifts over seconds, a ratio from
// adjacent short rounds is far steadier than one from two long runs in
// turn.
const CompareRounds = 5

// rounds returns how many rounds a comparison runs: CompareRounds, or
// fewer when there are fewer iterations.
func (c *Client) rounds() int {
	if c.cfg.Duration == 0 {
		return max(1, min(CompareRounds, c.cfg.Iters))
	}
	return CompareRounds
}

// roundIters returns the iterations of round k of rounds: Iters split as
// evenly as it goes (zero with a Duration, which each round splits).
func (c *Client) roundIters(k, rounds int) int {
	n := c.cfg.Iters / rounds
	if k < c.cfg.Iters%rounds {
		n++
	}
	return n
}

// compareBW runs the bandwidth test and the raw transfer alternately.
func (c *Client) compareBW(ctx context.Context, size int) (Stats, error) {
	rounds := c.rounds()
	total := Stats{Bytes: size}
	raw := &RawStats{Transport: c.link.Transport, CRC32c: c.rawCRC(), Rounds: rounds}
	var ratios []float64
	for k := range rounds {
		st, err := c.bwTest(ctx, size, c.roundIters(k, rounds), c.cfg.Duration/time.Duration(rounds))
		if err != nil {
			return total, err
		}
		rs, err := c.rawBW(ctx, size, st.Iterations)
		if err != nil {
			return total, fmt.Errorf("--compare-raw: %v", err)
		}
		total.Iterations += st.Iterations
		total.Seconds += st.Seconds
		total.BWPeak = max(total.BWPeak, st.BWPeak)
		raw.Bytes += rs.Bytes
		raw.Iterations += rs.Iterations
		raw.Seconds += rs.Seconds
		raw.Method = rs.Method
		if rs.BWAvg > 0 {
			ratios = append(ratios, st.BWAvg/rs.BWAvg)
		}
	}
	total.BWAvg = float64(size) * float64(total.Iterations) / total.Seconds / MB
	total.MsgRate = float64(total.Iterations) / total.Seconds / 1e6
	total.BWPeak = max(total.BWPeak, total.BWAvg)
	if raw.Seconds > 0 {
		raw.BWAvg = float64(raw.Bytes) / raw.Seconds / MB
	}
	total.Raw = raw
	m := median(ratios)
	total.Ratio = &m
	return total, nil
}

// compareLat runs the latency test and raw round trips alternately. The
// ratio is iWARP's typical (median) latency over the raw one's, the
// median over the rounds.
func (c *Client) compareLat(ctx context.Context, size int) (Stats, error) {
	rounds := c.rounds()
	var all, rawAll, ratios []float64
	var secs, rawSecs float64
	var method string
	for k := range rounds {
		st, samples, err := c.latTest(ctx, size, c.roundIters(k, rounds), c.cfg.Duration/time.Duration(rounds))
		if err != nil {
			return Stats{}, err
		}
		rs, rawSamples, err := c.rawLat(ctx, size, len(samples))
		if err != nil {
			return Stats{}, fmt.Errorf("--compare-raw: %v", err)
		}
		all, rawAll = append(all, samples...), append(rawAll, rawSamples...)
		secs += st.Seconds
		rawSecs += rs.Seconds
		method = rs.Method
		if m := Latencies(rawSamples).Typical; m > 0 {
			ratios = append(ratios, Latencies(samples).Typical/m)
		}
	}
	total := latResult(size, all, secs)
	raw := &RawStats{Transport: c.link.Transport, Bytes: size * len(rawAll), Iterations: len(rawAll), Seconds: rawSecs,
		CRC32c: c.rawCRC(), Rounds: rounds, Method: method, Lat: Latencies(rawAll)}
	if rawSecs > 0 {
		raw.BWAvg = float64(raw.Bytes) / rawSecs / MB
	}
	total.Raw = raw
	m := median(ratios)
	total.Ratio = &m
	return total, nil
}

// rawCRC reports whether the raw TCP transfer computes CRC32c: when the
// MPA connection does.
func (c *Client) rawCRC() bool { return c.link.Transport == "tcp" && c.link.CRC }

// RawLink is one raw connection to a perf server's raw listener: plain
// TCP, or a stream of an SCTP association of its own.
type RawLink struct {
	tcp  net.Conn
	stop func() bool
	a    *sctpddp.Association
	s    *sctpddp.Stream
}

// DialRawTCP connects to a raw listener over plain TCP. ctx, while the
// link is open, ends what it does.
func DialRawTCP(ctx context.Context, addr string) (*RawLink, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &RawLink{tcp: c, stop: context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })}, nil
}

// DialRawSCTP connects to a raw listener over DTLS and SCTP with cfg (the
// iWARP association's configuration, for the same tuning). ctx, while the
// link is open, ends what it does.
func DialRawSCTP(ctx context.Context, addr string, cfg *sctpddp.Config) (*RawLink, error) {
	a, err := sctpddp.Dial(ctx, "udp", addr, cfg)
	if err != nil {
		return nil, err
	}
	s, err := a.OpenStream(1)
	if err != nil {
		a.Close()
		return nil, err
	}
	// Reads take no context (sctpRecv): closing the association ends
	// them.
	return &RawLink{a: a, s: s, stop: context.AfterFunc(ctx, func() { a.Close() })}, nil
}

// Close closes the link.
func (l *RawLink) Close() {
	l.stop()
	if l.tcp != nil {
		l.tcp.Close()
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	l.a.Shutdown(sctx)
	cancel()
	l.a.Close()
}

// header sends the transfer's header.
func (l *RawLink) header(ctx context.Context, h RawHeader) error {
	b := h.Append(make([]byte, 0, RawHeaderLen))
	if l.tcp != nil {
		_, err := l.tcp.Write(b)
		return err
	}
	return sctpWrite(ctx, l.s, b)
}

// dialRaw connects to the server's raw listener and sends the header.
func (c *Client) dialRaw(ctx context.Context, h RawHeader) (*RawLink, error) {
	if c.remote.RawPort == 0 {
		return nil, fmt.Errorf("the server has no raw listener")
	}
	l, err := c.cfg.DialRaw(ctx, c.remote.RawPort)
	if err != nil {
		return nil, err
	}
	h.Token = c.remote.Token
	if err := l.header(ctx, h); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// rawBW moves size*count octets over the raw transport, in the
// direction the operation moves data; an atomic test makes count
// request/response exchanges of an Atomic Request's and Response's sizes
// instead, keeping as many outstanding as the iWARP test.
func (c *Client) rawBW(ctx context.Context, size, count int) (*RawStats, error) {
	if c.cfg.Op == OpAtomic {
		rs, _, err := c.rawRPC(ctx, rdmap.AtomicRequestLen, rdmap.AtomicResponseLen, count, c.limit(), false)
		if rs != nil {
			rs.Bytes, rs.BWAvg = size*count, float64(size*count)/rs.Seconds/MB
		}
		return rs, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	toClient := c.cfg.Op == OpRead
	h := RawHeader{Mode: RawToServer, CRC: c.rawCRC(), Size: uint32(size), Count: uint32(count)}
	if toClient {
		h.Mode = RawToClient
	}
	st := &RawStats{Transport: c.link.Transport, Bytes: size * count, Iterations: count, CRC32c: h.CRC}
	t0 := time.Now()
	l, err := c.dialRaw(ctx, h)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var ack [1]byte
	if l.tcp != nil {
		st.Method = streamMethod(size)
		if toClient {
			if err = newMsgReader(l.tcp, c.rawBuf, size, h.CRC).read(count); err == nil {
				_, err = l.tcp.Write(ack[:])
			}
		} else if err = newMsgWriter(l.tcp, c.rawSrc, c.rawBuf, size, h.CRC).write(count); err == nil {
			_, err = l.tcp.Read(ack[:])
		}
	} else {
		st.Method = fmt.Sprintf("SCTP messages of up to %d octets (the MULPDU), same association tuning", l.s.MULPDU())
		buf := c.rawBuf[:sctpBufLen]
		if toClient {
			if err = sctpRecv(l.s, size*count, buf); err == nil {
				err = sctpWrite(ctx, l.s, ack[:])
			}
		} else if err = sctpSend(ctx, l.s, c.rawSrc, size, count); err == nil {
			err = sctpRecv(l.s, 1, buf)
		}
	}
	if err != nil {
		return nil, err
	}
	st.Seconds = time.Since(t0).Seconds()
	if st.Seconds > 0 {
		st.BWAvg = float64(st.Bytes) / st.Seconds / MB
	}
	return st, nil
}

// streamMethod describes the raw TCP stream of size-octet messages.
func streamMethod(size int) string {
	if size >= gatherMin {
		return fmt.Sprintf("one TCP stream, messages gathered from the source into writes of up to %d KiB, reads of up to %d KiB", gatherBytes>>10, RawBufLen>>10)
	}
	return fmt.Sprintf("one TCP stream, messages copied into writes of up to %d KiB, reads of up to %d KiB", RawBufLen>>10, RawBufLen>>10)
}

// rawLat makes count round trips over the raw transport, one at a time:
// size octets there and back (Send, Write), a Read Request's size there
// and size back (Read), an Atomic Request's size there and an Atomic
// Response's back (Atomic). Samples are in µs, halved for the echo as
// latTest halves its ping-pongs.
func (c *Client) rawLat(ctx context.Context, size, count int) (*RawStats, []float64, error) {
	switch c.cfg.Op {
	case OpRead:
		return c.rawRPC(ctx, rdmap.ReadRequestLen, size, count, 1, false)
	case OpAtomic:
		return c.rawRPC(ctx, rdmap.AtomicRequestLen, rdmap.AtomicResponseLen, count, 1, false)
	}
	return c.rawRPC(ctx, size, size, count, 1, true)
}

// rawRPC makes count request/response exchanges of req and resp octets
// over the raw transport, with up to window outstanding (1: a ping-pong,
// sampled; more: requests posted in batches, as the iWARP test posts).
func (c *Client) rawRPC(ctx context.Context, req, resp, count, window int, halve bool) (*RawStats, []float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	h := RawHeader{Mode: RawRPC, CRC: c.rawCRC(), Size: uint32(resp), Count: uint32(count), Req: uint32(req), Window: uint32(window)}
	l, err := c.dialRaw(ctx, h)
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	st := &RawStats{Transport: c.link.Transport, Iterations: count, Bytes: resp * count, CRC32c: h.CRC}
	var samples []float64
	if window == 1 {
		samples = make([]float64, 0, count)
	}
	t0 := time.Now()
	if l.tcp != nil {
		st.Method = fmt.Sprintf("TCP: %d-octet requests, %d-octet answers, up to %d outstanding", req, resp, window)
		half := len(c.rawBuf) / 2
		w := newMsgWriter(l.tcp, c.rawSrc, c.rawBuf[half:], req, h.CRC)
		r := newMsgReader(l.tcp, c.rawBuf[:half], resp, h.CRC)
		var start time.Time
		for sent, done := 0, 0; done < count; {
			if sent-done <= window/2 && sent < count {
				start = time.Now()
				k := min(window-(sent-done), count-sent)
				if err := w.write(k); err != nil {
					return nil, nil, err
				}
				sent += k
			}
			k, err := r.readSome()
			if err != nil {
				return nil, nil, err
			}
			done += k
			if window == 1 && k == 1 {
				samples = append(samples, sample(start, halve))
			}
		}
	} else {
		st.Method = fmt.Sprintf("SCTP: %d-octet requests, %d-octet answers, up to %d outstanding", req, resp, window)
		buf := c.rawBuf[:sctpBufLen]
		var start time.Time
		for sent, done := 0, 0; done < count; {
			if sent-done <= window/2 && sent < count {
				start = time.Now()
				k := min(window-(sent-done), count-sent)
				if err := sctpSend(ctx, l.s, c.rawSrc, req, k); err != nil {
					return nil, nil, err
				}
				sent += k
			}
			if err := sctpRecv(l.s, resp, buf); err != nil {
				return nil, nil, err
			}
			done++
			if window == 1 {
				samples = append(samples, sample(start, halve))
			}
		}
	}
	st.Seconds = time.Since(t0).Seconds()
	if st.Seconds > 0 {
		st.BWAvg = float64(st.Bytes) / st.Seconds / MB
	}
	return st, samples, nil
}

// sample returns the µs since start, halved for a ping-pong's one way.
func sample(start time.Time, halve bool) float64 {
	d := float64(time.Since(start).Nanoseconds()) / 1e3
	if halve {
		d /= 2
	}
	return d
}
