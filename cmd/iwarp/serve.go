package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

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

const serveUsage = `usage: iwarp serve --listen URL [flags]

A responder for labs and tests. For each connection it registers a memory
region of --mr-size bytes with remote read and write rights, filled with
byte(i % 251), posts --recv-depth receive buffers of --recv-size bytes
(reposting each as it completes), and as soon as the stream runs sends one
Send whose 16-byte payload advertises the region, big-endian:

	STag (u32) | TO (u64) | length (u32)

It serves many connections at once and stops cleanly on SIGINT or SIGTERM.
For sctp:// it uses a self-signed certificate (or --cert/--key) and prints
its fingerprint for clients to pin; with --psk both ends share a key
instead. Without --psk clients are not authenticated (it says so).

--pcap FILE records every connection as a capture Wireshark opens: for
tcp:// the real MPA byte streams (each connection then passes through a
loopback relay that records it) in synthesized Ethernet/IPv4/TCP frames;
for sctp:// the SCTP packets before DTLS encryption. "iwarp dump FILE"
decodes both.

Examples:
	iwarp serve --listen tcp://127.0.0.1:4791 --json
	iwarp serve --listen sctp://:4792 --psk s3cret
	iwarp serve --listen tcp://:4791 --no-crc --pcap serve.pcap
	iwarp serve --listen tcp://127.0.0.1:4791 --observe 127.0.0.1:8080

--observe ADDR joins a running "iwarp demo" at ADDR as one more tab: a page
there that observes that tab (under "Or pair with tab", "Observe tab")
draws this serve's regions (the first 256 octets of each) and every
segment placed in them, live, as it draws a browser peer's.

With --json, stdout has one JSON object per line, its kind in "event";
"conn" numbers the connections from 1:

	{"event":"listening","url":"tcp://127.0.0.1:4791","fingerprint":"AB:.."}
	    (fingerprint for sctp:// with certificates only)
	{"event":"connected","conn":1,"transport":"tcp","peer":"127.0.0.1:50000",
	 "local":"127.0.0.1:4791","mpa_revision":2,"crc":true,"markers_tx":false,
	 "markers_rx":false,"stag":1234,"to":65536,"length":1048576}
	    (sctp://: "sctp_stream" and "authenticated" instead of the MPA fields)
	{"event":"recv","conn":1,"msn":1,"len":16,"sha256":"..",
	 "invalidated_stag":1234}   (invalidated_stag only for Send with Invalidate)
	{"event":"terminate","conn":1,"origin":"local"|"remote","layer":1,
	 "etype":1,"ecode":0,"layer_name":"DDP",
	 "name":"Tagged Buffer Error / Invalid Steering Tag","detail":".."}
	{"event":"closed","conn":1,"mr_sha256":".."}   (the region's final contents)
	{"event":"observed","demo":"127.0.0.1:8080","tab":3}   (with --observe)

Numbers (STag, TO, layer, etype, ecode) are JSON numbers.

Flags:
`

// serveTO is the Tagged Offset of the first octet of each served region.
const serveTO = 0x10000

type serveOptions struct {
	listen    string
	mrSize    int
	recvDepth int
	recvSize  int
	json      bool
	observe   string
	link      linkFlags
	demo      *demoLink // set when --observe joined a demo
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
	fs.StringVar(&o.observe, "observe", "", "stream every connection's placements to the `ADDR`ess of a running 'iwarp demo', where a page can watch them")
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
	l, rec, err := listenRecorded(ctx, ep, &o.link, stderr)
	if err != nil {
		return err
	}
	log := &eventLog{w: stdout, json: o.json}
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
		link, err := dialDemo(ctx, o.observe)
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
			fmt.Sprintf("the demo at %s shows this serve as tab %d: choose it under \"Or pair with tab\" and press \"Observe tab\"", o.observe, tab))
	}

	dev := rdmap.NewDevice(rdmap.DeviceConfig{})
	var wg sync.WaitGroup
	n := 0
	for {
		p, err := l.Accept(ctx)
		if err != nil {
			break
		}
		n++
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
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
	b := adv.Bytes()
	binary.BigEndian.PutUint32(b[0:4], mr.STag())
	binary.BigEndian.PutUint64(b[4:12], serveTO)
	binary.BigEndian.PutUint32(b[12:16], uint32(o.mrSize))

	// The MSN of each delivered untagged Send message, in order: its
	// receive completion follows.
	var msnMu sync.Mutex
	var msns []uint32
	obs := trace.Func(func(e trace.Event) {
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
		o.demo.add(id, mr)
		defer o.demo.gone(mr)
		shown := o.demo.observer(mr)
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
	c, err := p.accept(qp)
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
	if err := qp.PostSend(rdmap.SendWR{ID: 1, SGL: []rdmap.SGE{{MR: adv, Length: 16}}}); err != nil {
		log.emit(map[string]any{"event": "error", "conn": id, "error": err.Error()}, fmt.Sprintf("conn %d: advertising the region: %v", id, err))
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
	select {
	case <-qp.Terminated():
	case <-ctx.Done():
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
