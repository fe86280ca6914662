package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// perfRun is the client's side of one connection.
type perfRun struct {
	o       *perfOptions
	ep      endpoint
	qp      *rdmap.QueuePair
	scq     *rdmap.CompletionQueue // the send queue's completions
	rcq     *rdmap.CompletionQueue // the receives': scq, or one of their own
	c       *conn
	pd      *rdmap.ProtectionDomain
	ctl     *rdmap.MemoryRegion
	data    *rdmap.MemoryRegion // source of Writes and Sends, sink of Reads
	bufs    *recvBuffers
	credits int // Sends the server has buffers for
	window  int // credits the server returns at a time
	// serverBufs is how many receive buffers the server posts.
	serverBufs int
	remote     perfCtl
	ctlID      uint64
	progress   *progress
	stderr     io.Writer
}

// WRIDs: data operations count up from 1; control Sends have bit 62.
const ctlWRID = 1 << 62

func perfClient(ctx context.Context, ep endpoint, o *perfOptions, stdout, stderr io.Writer) error {
	var rec *recorder
	if o.link.pcap != "" {
		var err error
		if rec, err = newRecorder(o.link.pcap, ep.scheme); err != nil {
			return err
		}
	}
	err := perfClientRun(ctx, ep, o, rec, stdout, stderr)
	if cerr := rec.Close(); err == nil {
		err = cerr
	}
	return err
}

func perfClientRun(ctx context.Context, ep endpoint, o *perfOptions, rec *recorder, stdout, stderr io.Writer) error {
	sizes := o.sizes()
	maxSize := sizes[len(sizes)-1]
	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	r := &perfRun{o: o, ep: ep, pd: dev.NewProtectionDomain(), scq: dev.NewCompletionQueue(8192), progress: newProgress(stdout), stderr: stderr}
	r.rcq = r.scq
	if o.lat && o.op != "read" {
		// A Send or Write latency test waits only for receives: on a CQ
		// of their own, the waiting goroutine reads the connection
		// itself (CompletionQueue.Wait), as an application waiting on
		// its receive CQ does.
		r.rcq = dev.NewCompletionQueue(8192)
	}
	var err error
	r.qp, err = r.pd.NewQueuePair(rdmap.QPConfig{SendCQ: r.scq, RecvCQ: r.rcq, IRD: perfReadDepth, ORD: perfReadDepth, SendDepth: o.depth + 64, RecvDepth: 1024})
	if err != nil {
		return err
	}
	if r.ctl, err = r.pd.RegisterMemory(make([]byte, ctlLen), 0, 0); err != nil {
		return err
	}
	if r.data, err = r.pd.RegisterMemory(make([]byte, maxSize), 0, rdmap.RemoteWrite|rdmap.LocalWrite); err != nil {
		return err
	}
	fillPattern(r.data.Bytes())
	// Receive buffers: control messages, and the echoes of a Send ping-pong.
	bufSize := ctlLen
	if o.op == "send" && o.lat {
		bufSize = max(bufSize, maxSize)
	}
	if r.bufs, err = newRecvBuffers(r.pd, r.qp, 32, bufSize, 1<<32); err != nil {
		return err
	}
	// The server's receive buffers for data Sends: about 32 MiB.
	serverBufs := 8
	if o.op == "send" && !o.lat {
		serverBufs = max(4, min(256, (32<<20)/max(maxSize, ctlLen)))
	}
	r.serverBufs = serverBufs
	r.c, err = dial(ctx, ep, &o.link, rec, r.qp, stderr)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		r.qp.Close(closeCtx)
		cancel()
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r.c.close(closeCtx)
		cancel()
	}()
	if err := r.sendCtl(perfCtl{typ: ctlHello, size: uint32(maxSize), n: uint32(serverBufs), stag: r.data.STag(), to: 0}); err != nil {
		return err
	}
	if r.remote, err = r.waitCtl(ctx, ctlAdvert); err != nil {
		return err
	}
	r.window = int(r.remote.n)

	res := perfResult{Transport: ep.scheme, URL: ep.String(), Op: o.op, Test: "bw"}
	if o.lat {
		res.Test = "lat"
	}
	if !o.json {
		r.printHeader(stdout)
	}
	for _, size := range sizes {
		var st perfStats
		switch {
		case o.lat && o.compareRaw:
			st, err = r.compareLatTest(ctx, size)
		case o.lat:
			st, _, err = r.latTest(ctx, size, o.iters, o.duration)
		case o.compareRaw:
			st, err = r.compareTest(ctx, size)
		default:
			st, err = r.bwTest(ctx, size, o.iters, o.duration)
		}
		r.progress.end()
		if err != nil {
			return err
		}
		res.Results = append(res.Results, st)
		if !o.json {
			r.printLine(stdout, &st)
		}
	}
	if o.json {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	} else {
		fmt.Fprintln(stdout, strings.Repeat("-", 87))
	}
	return nil
}

type perfResult struct {
	Transport string      `json:"transport"`
	URL       string      `json:"url"`
	Op        string      `json:"op"`
	Test      string      `json:"test"`
	Results   []perfStats `json:"results"`
}

var opTitles = map[string]string{"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send"}

func (r *perfRun) printHeader(w io.Writer) {
	kind := "BW"
	if r.o.lat {
		kind = "Latency"
	}
	fmt.Fprintln(w, strings.Repeat("-", 87))
	fmt.Fprintf(w, "                    %s %s Test (iwarp %s)\n", opTitles[r.o.op], kind, r.ep)
	fmt.Fprintf(w, " %s\n", r.c.info)
	fmt.Fprintln(w, strings.Repeat("-", 87))
	if r.o.lat {
		h := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
		if r.o.compareRaw {
			h += "   raw t_typical[usec]   ratio"
		}
		fmt.Fprintln(w, h)
		return
	}
	h := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	if r.o.compareRaw {
		h += "   raw BW[MB/sec]   ratio"
	}
	fmt.Fprintln(w, h)
}

func (r *perfRun) printLine(w io.Writer, st *perfStats) {
	if l := st.Lat; l != nil {
		line := fmt.Sprintf(" %-7d %-10d %-7.2f        %-7.2f        %-7.2f          %-7.2f        %-7.2f          %-7.2f                %-7.2f",
			st.Bytes, st.Iterations, l.Min, l.Max, l.Typical, l.Avg, l.Stdev, l.P99, l.P999)
		if st.Raw != nil && st.Raw.Lat != nil {
			line += fmt.Sprintf("                %-7.2f            %.3f", st.Raw.Lat.Typical, *st.Ratio)
		}
		fmt.Fprintln(w, line)
		return
	}
	line := fmt.Sprintf(" %-10d %-10d       %-10.2f         %-10.2f           %-10.6f", st.Bytes, st.Iterations, st.BWPeak, st.BWAvg, st.MsgRate)
	if st.Raw != nil {
		line += fmt.Sprintf("   %-10.2f       %.3f", st.Raw.BWAvg, *st.Ratio)
	}
	fmt.Fprintln(w, line)
}

func (r *perfRun) sendCtl(c perfCtl) error {
	r.ctlID++
	return sendCtl(r.qp, r.ctl, ctlWRID+r.ctlID, c)
}

// wait returns the next completion, failing on an error status.
func (r *perfRun) wait(ctx context.Context) (rdmap.Completion, error) {
	cp, err := waitEither(ctx, r.scq, r.rcq)
	if err != nil {
		if qerr := r.qp.Err(); qerr != nil {
			return cp, fmt.Errorf("connection ended: %v", qerr)
		}
		return cp, err
	}
	if cp.Status != rdmap.StatusSuccess {
		if qerr := r.qp.Err(); qerr != nil {
			return cp, fmt.Errorf("connection ended: %v", qerr)
		}
		return cp, fmt.Errorf("%v failed: %v %v", cp.Op, cp.Status, cp.Err)
	}
	return cp, nil
}

// handleRecv takes a receive completion: credits are counted, other
// control messages returned. It reposts the buffer.
func (r *perfRun) handleRecv(cp rdmap.Completion) (perfCtl, bool, error) {
	msg, repost := r.bufs.take(cp)
	m, isCtl := parseCtl(msg)
	if err := repost(); err != nil {
		return m, false, err
	}
	if isCtl && m.typ == ctlCredit {
		r.credits += int(m.n)
		return m, false, nil
	}
	return m, isCtl, nil
}

// waitCtl waits for a control message of type typ, taking credits and
// send completions on the way.
func (r *perfRun) waitCtl(ctx context.Context, typ uint8) (perfCtl, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		cp, err := r.wait(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return perfCtl{}, errors.New("the server does not answer")
			}
			return perfCtl{}, err
		}
		if cp.Op != rdmap.WorkRecv {
			continue
		}
		m, isCtl, err := r.handleRecv(cp)
		if err != nil {
			return m, err
		}
		if isCtl && m.typ == typ {
			return m, nil
		}
		if isCtl {
			return m, fmt.Errorf("unexpected control message %d from the server", m.typ)
		}
	}
}

// start tells the server what comes next.
func (r *perfRun) start(ctx context.Context, size int) error {
	lat := uint8(0)
	if r.o.lat {
		lat = 1
	}
	if err := r.sendCtl(perfCtl{typ: ctlStart, op: opCodes[r.o.op], lat: lat, size: uint32(size)}); err != nil {
		return err
	}
	_, err := r.waitCtl(ctx, ctlAck)
	// The server has reposted every buffer before it answers (what it
	// received before the start has been answered too): as many Sends
	// may come as it has buffers, but for one kept for the done.
	r.credits = r.serverBufs - 1
	return err
}

// post posts data operation id of size bytes; only a signaled one
// completes on the CQ when it succeeds.
func (r *perfRun) post(id uint64, size int, signaled bool) error {
	sge := rdmap.SGE{MR: r.data, Length: uint32(size)}
	switch r.o.op {
	case "write":
		return r.qp.PostWrite(rdmap.WriteWR{ID: id, SGL: []rdmap.SGE{sge}, RemoteSTag: r.remote.stag, RemoteTO: r.remote.to, Unsignaled: !signaled})
	case "read":
		return r.qp.PostRead(rdmap.ReadWR{ID: id, Local: sge, RemoteSTag: r.remote.stag, RemoteTO: r.remote.to, Unsignaled: !signaled})
	default:
		return r.qp.PostSend(rdmap.SendWR{ID: id, SGL: []rdmap.SGE{sge}, Unsignaled: !signaled})
	}
}

// peakSkip is how many bytes of Writes or Sends a bandwidth test moves
// before its peak is measured, and how many any stretch of the peak
// moves: more than loopback's TCP buffers (or an SCTP send queue and
// receive window) hold, and more than a window of Read Responses.
const peakSkip = 16 << 20

type mark struct {
	t time.Time
	n int
}

// bwTest runs one size's bandwidth test.
func (r *perfRun) bwTest(ctx context.Context, size, iters int, duration time.Duration) (perfStats, error) {
	if err := r.start(ctx, size); err != nil {
		return perfStats{}, err
	}
	limit := r.o.depth
	if r.o.op == "read" {
		_, ord := r.qp.ReadLimits()
		limit = min(limit, max(1, ord))
	}
	// As perftest does (--cq-mod), only every mod-th operation asks for a
	// completion: it stands for those before it, since a send queue's
	// work requests complete in order. The goroutine that posts then
	// wakes once per mod operations rather than once for each. At most
	// half of those outstanding, so that mod more are posted while as
	// many are still under way.
	mod := max(1, min(r.o.cqMod, limit/2))
	gran := max(1, iters/200)
	if duration > 0 {
		gran = 16
	}
	r.progress.begin()
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
	// What the window has room for is posted as one batch: the Read
	// Requests (or small Writes and Sends) leave in one gather write.
	postMore := func() error {
		for posted-done < limit && more() && (r.o.op != "send" || r.credits > 0) {
			sig := (posted+1)%mod == 0 || (duration == 0 && posted+1 == iters)
			if err := r.post(uint64(posted+1), size, sig); err != nil {
				return err
			}
			posted++
			if sig {
				signaled = posted
			}
			if r.o.op == "send" {
				r.credits--
			}
		}
		return nil
	}
	for {
		if err := r.qp.PostBatch(postMore); err != nil {
			return perfStats{}, err
		}
		// Stop posting and waiting once the last signaled operation has
		// completed; the exchange with the server below covers those
		// after it (a --duration run does not know its last one when it
		// posts it).
		if !more() && done >= signaled {
			break
		}
		cp, err := r.wait(ctx)
		if err != nil {
			return perfStats{}, err
		}
		switch {
		case cp.Op == rdmap.WorkRecv:
			if _, isCtl, err := r.handleRecv(cp); err != nil {
				return perfStats{}, err
			} else if isCtl {
				return perfStats{}, errors.New("unexpected control message during the test")
			}
		case cp.WRID&ctlWRID != 0:
		default:
			done = int(cp.WRID)
			if done >= nextMark {
				nextMark = done + gran
				now := time.Now()
				marks = append(marks, mark{now, done})
				if duration > 0 {
					r.progress.update(size, float64(now.Sub(t0))/float64(duration))
				} else {
					r.progress.update(size, float64(done)/float64(iters))
				}
			}
		}
	}
	// Everything has landed once the server answers a message sent after
	// the last operation: it follows their data (and an RDMA Read's
	// Response precedes the answer), so they have all completed.
	if err := r.sendCtl(perfCtl{typ: ctlDone}); err != nil {
		return perfStats{}, err
	}
	if _, err := r.waitCtl(ctx, ctlAck); err != nil {
		return perfStats{}, err
	}
	t1 := time.Now()
	done = posted
	marks = append(marks, mark{t1, done})
	secs := t1.Sub(t0).Seconds()
	st := perfStats{Bytes: size, Iterations: done, Seconds: secs}
	st.BWAvg = float64(size) * float64(done) / secs / mib
	st.MsgRate = float64(done) / secs / 1e6
	// Peak: the best rate over any stretch of at least a twentieth of the
	// run that moves at least peakSkip bytes. A Write or Send completes
	// once the LLP has taken it, and up to a window of Read Responses
	// wait in the sockets to be read at memory speed: shorter stretches
	// would measure the socket buffers. The first peakSkip bytes of
	// Writes and Sends complete as fast as the sockets take them: they
	// start no stretch.
	first := 0
	if r.o.op != "read" {
		for first < len(marks) && marks[first].n*size < peakSkip {
			first++
		}
	}
	span := t1.Sub(t0) / 20
	for i, j := first, first; i < len(marks); i++ {
		for j < len(marks) && (marks[j].t.Sub(marks[i].t) < span || (marks[j].n-marks[i].n)*size < peakSkip) {
			j++
		}
		if j == len(marks) {
			break
		}
		if dt := marks[j].t.Sub(marks[i].t).Seconds(); dt > 0 {
			st.BWPeak = max(st.BWPeak, float64(size)*float64(marks[j].n-marks[i].n)/dt/mib)
		}
	}
	st.BWPeak = max(st.BWPeak, st.BWAvg)
	return st, nil
}

// latTest runs one size's latency test: iters round trips, or as many as
// fit in duration. It returns the samples (µs) with their summary.
func (r *perfRun) latTest(ctx context.Context, size, iters int, duration time.Duration) (perfStats, []float64, error) {
	if err := r.start(ctx, size); err != nil {
		return perfStats{}, nil, err
	}
	var samples []float64
	r.progress.begin()
	t0 := time.Now()
	deadline := t0.Add(duration)
	for i := 0; ; i++ {
		if duration > 0 && !time.Now().Before(deadline) || duration == 0 && i >= iters {
			break
		}
		start := time.Now()
		var err error
		switch r.o.op {
		case "read":
			err = r.qp.PostRead(rdmap.ReadWR{ID: uint64(i + 1), Local: rdmap.SGE{MR: r.data, Length: uint32(size)}, RemoteSTag: r.remote.stag, RemoteTO: r.remote.to})
		case "write":
			err = r.qp.PostWrite(rdmap.WriteWR{ID: uint64(i + 1), SGL: []rdmap.SGE{{MR: r.data, Length: uint32(size)}}, RemoteSTag: r.remote.stag, RemoteTO: r.remote.to, Unsignaled: true})
			if err == nil {
				err = r.qp.PostSend(rdmap.SendWR{ID: uint64(i + 1), Unsignaled: true})
			}
		default:
			err = r.qp.PostSend(rdmap.SendWR{ID: uint64(i + 1), SGL: []rdmap.SGE{{MR: r.data, Length: uint32(size)}}, Unsignaled: true})
		}
		if err != nil {
			return perfStats{}, nil, err
		}
		for {
			cp, err := r.wait(ctx)
			if err != nil {
				return perfStats{}, nil, err
			}
			if r.o.op == "read" && cp.Op == rdmap.WorkRead {
				break
			}
			if r.o.op != "read" && cp.Op == rdmap.WorkRecv {
				if _, isCtl, err := r.handleRecv(cp); err != nil {
					return perfStats{}, nil, err
				} else if !isCtl {
					break
				}
			}
		}
		d := float64(time.Since(start).Nanoseconds()) / 1e3
		if r.o.op != "read" {
			d /= 2
		}
		samples = append(samples, d)
		if duration > 0 {
			r.progress.update(size, float64(time.Since(t0))/float64(duration))
		} else {
			r.progress.update(size, float64(i+1)/float64(iters))
		}
	}
	return latResult(size, samples, time.Since(t0).Seconds()), samples, nil
}

// latResult summarises a latency test of len(samples) round trips of size
// bytes that took secs.
func latResult(size int, samples []float64, secs float64) perfStats {
	st := perfStats{Bytes: size, Iterations: len(samples), Seconds: secs, Lat: latencies(samples)}
	st.BWAvg = float64(size) * float64(len(samples)) / secs / mib
	st.BWPeak = st.BWAvg
	st.MsgRate = float64(len(samples)) / secs / 1e6
	return st
}

// compareRounds is how many rounds --compare-raw alternates between
// iWARP and the raw transport. The ratio printed is the median of the
// rounds' ratios: on a shared machine whose speed drifts over seconds, a
// ratio from adjacent short rounds is far steadier than one from two long
// runs in turn (as the transports' own benchmarks measure it).
const compareRounds = 5

// compareRounds returns how many rounds --compare-raw runs: compareRounds,
// or fewer when there are fewer iterations.
func (r *perfRun) compareRounds() int {
	if r.o.duration == 0 {
		return max(1, min(compareRounds, r.o.iters))
	}
	return compareRounds
}

// roundIters returns the iterations of round k of rounds: --iters split
// as evenly as it goes (zero with --duration, which each round splits).
func (r *perfRun) roundIters(k, rounds int) int {
	n := r.o.iters / rounds
	if k < r.o.iters%rounds {
		n++
	}
	return n
}

// median returns the median of the rounds' ratios (0 if there are none).
func median(ratios []float64) *float64 {
	m := 0.0
	if len(ratios) > 0 {
		sort.Float64s(ratios)
		m = ratios[len(ratios)/2]
	}
	return &m
}

// compareTest runs the bandwidth test and the raw transfer alternately.
func (r *perfRun) compareTest(ctx context.Context, size int) (perfStats, error) {
	rounds := r.compareRounds()
	total := perfStats{Bytes: size}
	raw := &rawStats{Transport: r.ep.scheme}
	var ratios []float64
	for k := range rounds {
		iters := r.roundIters(k, rounds)
		st, err := r.bwTest(ctx, size, iters, r.o.duration/time.Duration(rounds))
		if err != nil {
			return total, err
		}
		r.progress.end()
		rs, err := r.rawTest(ctx, size, st.Iterations)
		if err != nil {
			return total, fmt.Errorf("--compare-raw: %v", err)
		}
		total.Iterations += st.Iterations
		total.Seconds += st.Seconds
		total.BWPeak = max(total.BWPeak, st.BWPeak)
		raw.Bytes += rs.Bytes
		raw.Iterations += rs.Iterations
		raw.Seconds += rs.Seconds
		raw.CRC32c = rs.CRC32c
		if rs.BWAvg > 0 {
			ratios = append(ratios, st.BWAvg/rs.BWAvg)
		}
	}
	total.BWAvg = float64(size) * float64(total.Iterations) / total.Seconds / mib
	total.MsgRate = float64(total.Iterations) / total.Seconds / 1e6
	total.BWPeak = max(total.BWPeak, total.BWAvg)
	raw.BWAvg = float64(raw.Bytes) / raw.Seconds / mib
	raw.Rounds = rounds
	total.Raw = raw
	total.Ratio = median(ratios)
	return total, nil
}

// compareLatTest runs the latency test and raw round trips alternately.
// The ratio is iWARP's typical (median) latency over the raw one's, the
// median over the rounds.
func (r *perfRun) compareLatTest(ctx context.Context, size int) (perfStats, error) {
	rounds := r.compareRounds()
	var all, rawAll, ratios []float64
	var secs, rawSecs float64
	for k := range rounds {
		iters := r.roundIters(k, rounds)
		st, samples, err := r.latTest(ctx, size, iters, r.o.duration/time.Duration(rounds))
		if err != nil {
			return perfStats{}, err
		}
		r.progress.end()
		rs, rawSamples, err := r.rawLatTest(ctx, size, len(samples))
		if err != nil {
			return perfStats{}, fmt.Errorf("--compare-raw: %v", err)
		}
		all, rawAll = append(all, samples...), append(rawAll, rawSamples...)
		secs += st.Seconds
		rawSecs += rs.Seconds
		if m := latencies(rawSamples).Typical; m > 0 {
			ratios = append(ratios, latencies(samples).Typical/m)
		}
	}
	total := latResult(size, all, secs)
	raw := &rawStats{Transport: r.ep.scheme, Bytes: size * len(rawAll), Iterations: len(rawAll), Seconds: rawSecs,
		CRC32c: r.rawCRC(), Rounds: rounds, Lat: latencies(rawAll)}
	if rawSecs > 0 {
		raw.BWAvg = float64(raw.Bytes) / rawSecs / mib
	}
	total.Raw = raw
	total.Ratio = median(ratios)
	return total, nil
}

// rawCRC reports whether the raw TCP transfer computes CRC32c: when the
// MPA connection does.
func (r *perfRun) rawCRC() bool {
	return r.ep.scheme == "tcp" && r.c.info.CRC != nil && *r.c.info.CRC
}

// rawLink is one --compare-raw connection to the perf server's raw
// listener: plain TCP, or a stream of an SCTP association of its own
// (over DTLS, with the same tuning as the iWARP one).
type rawLink struct {
	tcp  net.Conn
	stop func() bool
	a    *sctpddp.Association
	s    *sctpddp.Stream
	buf  []byte
	ack  [1]byte
}

func (r *perfRun) dialRaw(ctx context.Context) (*rawLink, error) {
	host, _, _ := net.SplitHostPort(r.ep.addr)
	addr := net.JoinHostPort(host, strconv.Itoa(int(r.remote.port)))
	if r.ep.scheme == "tcp" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &rawLink{tcp: c, stop: context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })}, nil
	}
	cfg, _, _, err := r.o.link.sctpConfig(r.ep.addr, nil)
	if err != nil {
		return nil, err
	}
	a, err := sctpddp.Dial(ctx, "udp", addr, cfg)
	if err != nil {
		return nil, err
	}
	s, err := a.OpenStream(1)
	if err != nil {
		a.Close()
		return nil, err
	}
	return &rawLink{a: a, s: s, buf: make([]byte, 64<<10+16)}, nil
}

// start sends the transfer's header.
func (l *rawLink) start(ctx context.Context, mode uint8, crc bool, size, count int) error {
	var h [rawHeaderLen]byte
	putRawHeader(h[:], mode, crc, size, count)
	if l.tcp != nil {
		_, err := l.tcp.Write(h[:])
		return err
	}
	return rawWriteSCTP(ctx, l.s, h[:])
}

func (l *rawLink) close() {
	if l.tcp != nil {
		l.stop()
		l.tcp.Close()
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	l.a.Shutdown(sctx)
	cancel()
}

// rawLatTest makes count round trips over the plain transport: size
// bytes there and back (Send, Write), or a request there and size bytes
// back (Read). Samples are in µs, halved for the echo as latTest halves
// its ping-pongs.
func (r *perfRun) rawLatTest(ctx context.Context, size, count int) (*rawStats, []float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	l, err := r.dialRaw(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer l.close()
	mode, req := uint8(rawEcho), size
	if r.o.op == "read" {
		mode, req = rawRequest, rawRequestLen
	}
	crc := r.rawCRC()
	if err := l.start(ctx, mode, crc, size, count); err != nil {
		return nil, nil, err
	}
	out, in := newRawMsg(req, crc), newRawMsg(size, crc)
	samples := make([]float64, 0, count)
	t0 := time.Now()
	for range count {
		start := time.Now()
		if l.tcp != nil {
			if err = out.write(l.tcp); err == nil {
				err = in.read(l.tcp)
			}
		} else if err = rawSendSCTP(ctx, l.s, out.buf, 1); err == nil {
			err = rawRecvSCTP(ctx, l.s, size, 1, l.buf)
		}
		if err != nil {
			return nil, nil, err
		}
		d := float64(time.Since(start).Nanoseconds()) / 1e3
		if mode == rawEcho {
			d /= 2
		}
		samples = append(samples, d)
	}
	return &rawStats{Seconds: time.Since(t0).Seconds()}, samples, nil
}

// rawTest moves size*count bytes over the plain transport, in the
// direction the operation moves data.
func (r *perfRun) rawTest(ctx context.Context, size, count int) (*rawStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	l, err := r.dialRaw(ctx)
	if err != nil {
		return nil, err
	}
	defer l.close()
	toClient := r.o.op == "read"
	mode := uint8(rawToServer)
	if toClient {
		mode = rawToClient
	}
	crc := r.rawCRC()
	st := &rawStats{Transport: r.ep.scheme, Bytes: size * count, Iterations: count, CRC32c: crc}
	t0 := time.Now()
	if err := l.start(ctx, mode, crc, size, count); err != nil {
		return nil, err
	}
	if l.tcp != nil {
		if toClient {
			err = rawRecvTCP(l.tcp, size, count, crc)
			l.tcp.Write([]byte{1})
		} else if err = rawSendTCP(l.tcp, size, count, crc); err == nil {
			_, err = io.ReadFull(l.tcp, l.ack[:])
		}
	} else {
		if toClient {
			if err = rawRecvSCTP(ctx, l.s, size, count, l.buf); err == nil {
				err = rawWriteSCTP(ctx, l.s, []byte{1})
			}
		} else if err = rawSendSCTP(ctx, l.s, patterned(size), count); err == nil {
			_, _, err = l.s.ReadMessage(ctx, l.buf)
		}
	}
	if err != nil {
		return nil, err
	}
	st.Seconds = time.Since(t0).Seconds()
	if st.Seconds > 0 {
		st.BWAvg = float64(st.Bytes) / st.Seconds / mib
	}
	return st, nil
}
