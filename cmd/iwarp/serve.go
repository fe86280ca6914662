package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/admission"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp/internal/demo"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/term"
	"github.com/iwarpgo/iwarp/trace"
)

func init() {
	register("serve", command{
		summary: "a responder for labs and tests: registers memory, advertises it, reports what arrives",
		run:     runServe,
	})
}

// serveTO is the Tagged Offset of the first octet of each served region.
const serveTO = 0x10000

type serveOptions struct {
	listen    string
	mrSize    int
	recvDepth int
	recvSize  int
	json      bool
	advSend   bool
	observe   string
	link      linkFlags
	demo      *demo.Link // set when --observe joined a demo

	maxConns        int
	maxConnsPerPeer int
	memBudget       int64
	idleTimeout     time.Duration
}

// connBytes is what one connection of serve holds in regions and buffers.
func (o *serveOptions) connBytes() int64 {
	return int64(o.mrSize) + int64(o.recvDepth)*int64(o.recvSize) + 16
}

func runServe(args []string, stdout, stderr io.Writer) error {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "", "the `URL` to listen on: tcp://host:port or sctp://host:port")
	fs.IntVar(&o.mrSize, "mr-size", 1<<20, "bytes of the memory region registered for each connection")
	fs.IntVar(&o.recvDepth, "recv-depth", 16, "receive buffers posted for each connection")
	fs.IntVar(&o.recvSize, "recv-size", 65536, "bytes of each receive buffer")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per event on stdout")
	fs.BoolVar(&o.advSend, "advertise-send", false, "also Send the region's 16-octet descriptor as the stream's first message")
	fs.StringVar(&o.observe, "observe", "", "stream every connection's placements to the `ADDR`ess of a running 'iwarp demo', where a page can watch them")
	fs.IntVar(&o.maxConns, "max-conns", 256, "connections served at once, in all")
	fs.IntVar(&o.maxConnsPerPeer, "max-conns-per-peer", 16, "connections served at once from one peer (an IPv4 address or an IPv6 /64)")
	fs.Int64Var(&o.memBudget, "mem-budget", 1<<30, "octets of regions and receive buffers, in all connections")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 5*time.Minute, "close a connection on which nothing arrives or leaves for this long (0: never)")
	o.link.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if o.listen == "" {
		return usagef("--listen URL is required")
	}
	ep, err := parseEndpoint(o.listen)
	if err != nil {
		return err
	}
	if err := o.link.check(ep, true); err != nil {
		return err
	}
	if o.mrSize <= 0 || o.mrSize > 1<<30 {
		return usagef("--mr-size must be between 1 and 1 GiB")
	}
	if o.recvDepth <= 0 || o.recvDepth > 4096 {
		return usagef("--recv-depth must be between 1 and 4096")
	}
	if o.maxConns <= 0 || o.maxConnsPerPeer <= 0 {
		return usagef("--max-conns and --max-conns-per-peer must be at least 1")
	}
	if o.memBudget < o.connBytes() {
		return usagef("--mem-budget of %d octets does not hold one connection's %d", o.memBudget, o.connBytes())
	}
	if o.recvSize <= 0 || o.recvSize > 16<<20 {
		return usagef("--recv-size must be between 1 and 16 MiB")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, ep, &o, stdout, stderr)
}

// eventLog writes events as JSON lines or as text, one at a time.
type eventLog struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
}

// emit writes one event: v (a map or struct with an "event" field) as
// JSON, or text as a line.
func (l *eventLog) emit(v any, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.json {
		b, _ := json.Marshal(v)
		l.w.Write(append(b, '\n'))
		return
	}
	fmt.Fprintln(l.w, text)
}

func serve(ctx context.Context, ep endpoint, o *serveOptions, stdout, stderr io.Writer) error {
	log := &eventLog{w: stdout, json: o.json}
	refused := newRefusals(func(peer, why string) {
		log.emit(map[string]any{"event": "refused", "peer": peer, "reason": why}, fmt.Sprintf("refused %s: %s", peer, why))
	}, func(n int) {
		log.emit(map[string]any{"event": "unreported", "refused": n}, fmt.Sprintf("%d more refused connections not reported", n))
	})
	defer refused.close()
	o.link.refused = func(remote net.Addr, why error) { refused.report(remote.String(), why.Error()) }
	l, rec, err := listenRecorded(ctx, ep, &o.link, stderr)
	if err != nil {
		return err
	}
	url := ep.scheme + "://" + l.Addr().String()
	ev := map[string]any{"event": "listening", "url": url}
	text := "listening on " + url
	if l.fingerprint != "" {
		ev["fingerprint"] = l.fingerprint
		text += "\nfingerprint sha-256 " + l.fingerprint
	}
	log.emit(ev, text)
	if l.fingerprint != "" && o.json {
		fmt.Fprintln(stderr, "iwarp: fingerprint sha-256", l.fingerprint)
	}

	if o.observe != "" {
		link, err := demo.DialLink(ctx, o.observe, "iwarp serve")
		if err != nil {
			l.Close()
			rec.Close()
			return err
		}
		defer link.Close()
		tab, err := link.Tab(ctx)
		if err != nil {
			l.Close()
			rec.Close()
			return err
		}
		o.demo = link
		log.emit(map[string]any{"event": "observed", "demo": o.observe, "tab": tab},
			fmt.Sprintf("the demo at %s can watch this serve: type the code %d under \"Code from another tab\" and press \"Observe tab\"", o.observe, tab))
	}

	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	adm := admission.New(admission.Limits{MaxConns: o.maxConns, MaxConnsPerPeer: o.maxConnsPerPeer, MemBudget: o.memBudget})
	var wg sync.WaitGroup
	n := 0
	for {
		p, err := l.Accept(ctx)
		if err != nil {
			break
		}
		if err := adm.Take(p.peer, o.connBytes()); err != nil {
			p.reject()
			refused.report(p.peer, serveRefusal(err))
			continue
		}
		n++
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			defer adm.Release(p.peer, o.connBytes())
			if err := serveConn(ctx, dev, p, id, o, log); err != nil {
				fmt.Fprintf(stderr, "iwarp serve: connection %d from %s: %v\n", id, p.peer, err)
			}
		}(n)
	}
	l.Close()
	wg.Wait()
	return rec.Close()
}

// serveConn runs one connection until it ends or ctx is done.
func serveConn(ctx context.Context, dev *rdmap.Device, p *pending, id int, o *serveOptions, log *eventLog) error {
	pd := dev.NewProtectionDomain()
	// What the connection registers, and nothing more.
	pd.SetLimits(o.recvDepth+2, o.connBytes())
	mem := make([]byte, o.mrSize)
	for i := range mem {
		mem[i] = byte(i % 251)
	}
	mr, err := pd.RegisterMemory(mem, serveTO, rdmap.RemoteRead|rdmap.RemoteWrite|rdmap.LocalWrite)
	if err != nil {
		p.reject()
		return err
	}
	defer mr.Deregister()
	bufs := make([]*rdmap.MemoryRegion, o.recvDepth)
	for i := range bufs {
		if bufs[i], err = pd.RegisterMemory(make([]byte, o.recvSize), 0, rdmap.LocalWrite); err != nil {
			p.reject()
			return err
		}
		defer bufs[i].Deregister()
	}
	adv, err := pd.RegisterMemory(make([]byte, 16), 0, 0)
	if err != nil {
		p.reject()
		return err
	}
	defer adv.Deregister()
	mr.Remote().Append(adv.Bytes()[:0])

	// The MSN of each delivered untagged Send message, in order: its
	// receive completion follows.
	var msnMu sync.Mutex
	var msns []uint32
	var active atomic.Int64 // when something last arrived or left, in Unix nanoseconds
	active.Store(time.Now().UnixNano())
	obs := trace.Func(func(e trace.Event) {
		if e.Kind == trace.SegmentSent || e.Kind == trace.SegmentPlaced {
			active.Store(time.Now().UnixNano())
		}
		switch e.Kind {
		case trace.MessageDelivered:
			if !e.Tagged && e.QN == rdmap.QNSend {
				msnMu.Lock()
				msns = append(msns, e.MSN)
				msnMu.Unlock()
			}
		case trace.Terminate:
			if e.Err != nil {
				logTerminate(log, id, e.Err)
			}
		}
	})
	var observer trace.Observer = obs
	if o.demo != nil {
		o.demo.Add(fmt.Sprintf("serve connection %d", id), mr)
		defer o.demo.Gone(mr)
		shown := o.demo.Observer(mr)
		observer = trace.Func(func(e trace.Event) {
			obs.Observe(e)
			shown.Observe(e)
		})
	}
	scq, rcq := dev.NewCompletionQueue(64), dev.NewCompletionQueue(o.recvDepth+1)
	qp, err := pd.NewQueuePair(rdmap.QPConfig{SendCQ: scq, RecvCQ: rcq, RecvDepth: o.recvDepth, Observer: observer})
	if err != nil {
		p.reject()
		return err
	}
	post := func(i int) error {
		return qp.PostRecv(rdmap.RecvWR{ID: uint64(i), SGL: []rdmap.SGE{{MR: bufs[i], Length: uint32(o.recvSize)}}})
	}
	for i := range bufs {
		if err := post(i); err != nil {
			p.reject()
			return err
		}
	}
	c, err := p.acceptWith(ctx, qp, adv.Bytes())
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		qp.Close(closeCtx)
		cancel()
		return err
	}
	ev := struct {
		Event string `json:"event"`
		Conn  int    `json:"conn"`
		connInfo
		STag   uint32 `json:"stag"`
		TO     uint64 `json:"to"`
		Length int    `json:"length"`
	}{"connected", id, c.info, mr.STag(), serveTO, o.mrSize}
	log.emit(ev, fmt.Sprintf("conn %d: connected: %v; region STag %#08x TO %#x length %d", id, c.info, mr.STag(), uint64(serveTO), o.mrSize))
	if o.advSend {
		if err := qp.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 16}}}); err != nil {
			log.emit(map[string]any{"event": "error", "conn": id, "error": err.Error()}, fmt.Sprintf("conn %d: advertising the region: %v", id, err))
		}
	}

	handle := func(cp rdmap.Completion) {
		if cp.Status != rdmap.StatusSuccess || cp.Op != rdmap.WorkRecv {
			return
		}
		msnMu.Lock()
		var msn uint32
		if len(msns) > 0 {
			msn, msns = msns[0], msns[1:]
		}
		msnMu.Unlock()
		i := int(cp.WRID)
		sum := sha256.Sum256(bufs[i].Bytes()[:cp.ByteLen])
		ev := struct {
			Event       string  `json:"event"`
			Conn        int     `json:"conn"`
			MSN         uint32  `json:"msn"`
			Len         uint32  `json:"len"`
			SHA256      string  `json:"sha256"`
			Invalidated *uint32 `json:"invalidated_stag,omitempty"`
		}{"recv", id, msn, cp.ByteLen, hex.EncodeToString(sum[:]), nil}
		text := fmt.Sprintf("conn %d: received Send MSN %d, %d bytes, sha256 %x", id, msn, cp.ByteLen, sum[:8])
		if cp.Flags&rdmap.FlagInvalidated != 0 {
			s := cp.InvalidatedSTag
			ev.Invalidated = &s
			text += fmt.Sprintf(", invalidated STag %#08x", s)
		}
		log.emit(ev, text)
		post(i)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cp, err := rcq.Wait(rctx)
			if err != nil {
				return
			}
			handle(cp)
		}
	}()
	idle := make(chan struct{})
	if o.idleTimeout > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(o.idleTimeout / 4)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					if time.Since(time.Unix(0, active.Load())) >= o.idleTimeout {
						close(idle)
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	select {
	case <-qp.Terminated():
		if at, err, ok := c.peerDead(); ok {
			log.emit(map[string]any{"event": "peer_dead", "conn": id, "at": at.UTC().Format(time.RFC3339Nano), "error": err.Error()},
				fmt.Sprintf("conn %d: peer dead at %s: %v", id, at.Format(peerDeadTime), err))
		}
	case <-ctx.Done():
	case <-idle:
		log.emit(map[string]any{"event": "idle", "conn": id}, fmt.Sprintf("conn %d: closing: nothing moved for %v", id, o.idleTimeout))
	}
	cancel()
	<-done
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 2*time.Second)
	c.close(closeCtx)
	cancelClose()
	var rest [64]rdmap.Completion
	for {
		k := rcq.Poll(rest[:])
		if k == 0 {
			break
		}
		for _, cp := range rest[:k] {
			handle(cp)
		}
	}
	sum := sha256.Sum256(mr.Bytes())
	log.emit(map[string]any{"event": "closed", "conn": id, "mr_sha256": hex.EncodeToString(sum[:])},
		fmt.Sprintf("conn %d: closed; region sha256 %x", id, sum))
	return nil
}

// serveRefusal says which of serve's flags an admission refusal met.
func serveRefusal(err error) string {
	flag := map[admission.Limit]string{admission.Conns: "--max-conns", admission.PeerConns: "--max-conns-per-peer", admission.Memory: "--mem-budget"}
	var r *admission.Refusal
	if errors.As(err, &r) {
		return fmt.Sprintf("%v (%s)", r, flag[r.Limit])
	}
	return err.Error()
}

func logTerminate(log *eventLog, id int, e *term.Error) {
	origin := "local"
	if e.Remote {
		origin = "remote"
	}
	ev := map[string]any{"event": "terminate", "conn": id, "origin": origin,
		"layer": uint8(e.Layer), "etype": e.EType, "ecode": e.Code,
		"layer_name": e.Layer.String(), "name": e.Name()}
	if e.Detail != "" {
		ev["detail"] = e.Detail
	}
	log.emit(ev, fmt.Sprintf("conn %d: Terminate (%s): %s %s", id, origin, e.Layer, e.Name()))
}
