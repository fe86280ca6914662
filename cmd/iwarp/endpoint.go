package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// endpoint is a parsed endpoint URL: tcp://host:port (MPA over TCP) or
// sctp://host:port (DDP over SCTP over DTLS over UDP).
type endpoint struct {
	scheme string // "tcp" or "sctp"
	addr   string // host:port
}

func (e endpoint) String() string { return e.scheme + "://" + e.addr }

// parseEndpoint parses an endpoint URL. Its errors are usage errors.
func parseEndpoint(s string) (endpoint, error) {
	if s == "" {
		return endpoint{}, usagef("missing endpoint URL (tcp://host:port or sctp://host:port)")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return endpoint{}, usagef("bad endpoint %q: want tcp://host:port or sctp://host:port", s)
	}
	if u.Scheme != "tcp" && u.Scheme != "sctp" {
		return endpoint{}, usagef("bad endpoint %q: scheme must be tcp (MPA over TCP) or sctp (DDP over SCTP over DTLS)", s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return endpoint{}, usagef("bad endpoint %q: missing port", s)
	}
	return endpoint{scheme: u.Scheme, addr: u.Host}, nil
}

// linkFlags are the transport options shared by serve and perf.
type linkFlags struct {
	markers     bool
	noCRC       bool
	fingerprint string
	psk         string
	pskIdentity string
	certFile    string
	keyFile     string
	pcap        string
	keylog      string
}

func (f *linkFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.markers, "markers", false, "tcp://: ask the peer for MPA Markers (RFC 5044 §5)")
	fs.BoolVar(&f.noCRC, "no-crc", false, "tcp://: ask for no MPA CRC32c (used only if both ends ask)")
	fs.StringVar(&f.fingerprint, "fingerprint", "", "sctp:// client: the server certificate's SHA-256 fingerprint (AB:CD:...) to pin")
	fs.StringVar(&f.psk, "psk", "", "sctp://: a pre-shared key (text) given to both ends instead of certificates")
	fs.StringVar(&f.pskIdentity, "psk-identity", "iwarp", "sctp://: the name of the pre-shared key")
	fs.StringVar(&f.certFile, "cert", "", "sctp:// listener: PEM certificate file (default: a fresh self-signed one)")
	fs.StringVar(&f.keyFile, "key", "", "sctp:// listener: PEM private key file for --cert")
	fs.StringVar(&f.pcap, "pcap", "", "record the session(s) as a pcap capture in `FILE`")
	fs.StringVar(&f.keylog, "keylog", "", "sctp://: append the DTLS keys to `FILE` (NSS key log) for Wireshark to decrypt a capture")
}

func (f *linkFlags) check(ep endpoint, listening bool) error {
	if f.fingerprint != "" && f.psk != "" {
		return usagef("--fingerprint and --psk are two ways to authenticate the peer: give one")
	}
	if f.fingerprint != "" {
		if listening {
			return usagef("--fingerprint is for the client; the listener prints its own")
		}
		if _, err := sctpddp.ParseFingerprint(f.fingerprint); err != nil {
			return usagef("bad --fingerprint: %v", err)
		}
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return usagef("--cert and --key go together")
	}
	if f.certFile != "" && !listening {
		return usagef("--cert and --key are for the listener")
	}
	if ep.scheme == "tcp" && (f.fingerprint != "" || f.psk != "" || f.certFile != "") {
		return usagef("--fingerprint, --psk, --cert and --key apply to sctp:// endpoints only")
	}
	if ep.scheme == "tcp" && f.keylog != "" {
		return usagef("--keylog applies to sctp:// endpoints only")
	}
	if ep.scheme == "sctp" && (f.markers || f.noCRC) {
		return usagef("--markers and --no-crc apply to tcp:// endpoints only")
	}
	return nil
}

// connInfo describes an established connection, for people and for the
// connected event.
type connInfo struct {
	Transport string `json:"transport"`
	Peer      string `json:"peer"`
	Local     string `json:"local"`
	// MPA/TCP.
	MPARevision int   `json:"mpa_revision,omitempty"`
	CRC         *bool `json:"crc,omitempty"`
	MarkersTx   *bool `json:"markers_tx,omitempty"`
	MarkersRx   *bool `json:"markers_rx,omitempty"`
	// DDP/SCTP.
	SCTPStream *int `json:"sctp_stream,omitempty"`
	// Authenticated says whether the peer was authenticated (sctp://).
	Authenticated *bool `json:"authenticated,omitempty"`
}

func (i connInfo) String() string {
	if i.Transport == "tcp" {
		return fmt.Sprintf("tcp %s -> %s, MPA rev %d, CRC %v, markers tx %v rx %v", i.Local, i.Peer, i.MPARevision, *i.CRC, *i.MarkersTx, *i.MarkersRx)
	}
	return fmt.Sprintf("sctp %s -> %s, DDP stream %d", i.Local, i.Peer, *i.SCTPStream)
}

func mpaInfo(c *mpa.Conn, peer net.Addr) connInfo {
	n := c.Negotiated()
	return connInfo{Transport: "tcp", Peer: peer.String(), Local: c.LocalAddr().String(),
		MPARevision: n.Revision, CRC: &n.CRC, MarkersTx: &n.MarkersTx, MarkersRx: &n.MarkersRx}
}

func sctpInfo(a *sctpddp.Association, s *sctpddp.Session, authenticated bool) connInfo {
	id := int(s.ID())
	return connInfo{Transport: "sctp", Peer: a.RemoteAddr().String(), Local: a.LocalAddr().String(),
		SCTPStream: &id, Authenticated: &authenticated}
}

// conn is an established connection carrying one queue pair.
type conn struct {
	info connInfo
	qp   *rdmap.QueuePair
	// after runs once the queue pair is closed: it ends the SCTP
	// association of a client, or the recording of a TCP connection.
	after func()
}

// close closes the queue pair (draining what is queued, until ctx ends)
// and with it the transport connection.
func (c *conn) close(ctx context.Context) {
	c.qp.Close(ctx)
	if c.after != nil {
		c.after()
	}
}

// sctpMTU is the SCTP MTU for an association with or on addr: pion's
// usual 1350 on networks, 8000 on loopback (sctpddp.LoopbackMTU), where
// the UDP datagrams need no fragmenting at any size.
func sctpMTU(addr string) uint32 {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return sctpddp.LoopbackMTU
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return sctpddp.LoopbackMTU
	}
	return sctpddp.DefaultMTU
}

// sctpConfig builds the DTLS/SCTP configuration. It returns whether the
// peer is authenticated and the listener's certificate fingerprint.
func (f *linkFlags) sctpConfig(addr string, rec *recorder) (*sctpddp.Config, bool, string, error) {
	cfg := &sctpddp.Config{MTU: sctpMTU(addr)}
	if rec != nil {
		cfg.Trace = rec.sctpTrace
	}
	if f.keylog != "" {
		kl, err := os.OpenFile(f.keylog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, false, "", err
		}
		// Left open for the process's life: every handshake appends.
		cfg.KeyLogWriter = kl
	}
	if f.psk != "" {
		cfg.PSK, cfg.PSKIdentity = []byte(f.psk), []byte(f.pskIdentity)
		return cfg, true, "", nil
	}
	var cert tls.Certificate
	var err error
	if f.certFile != "" {
		cert, err = tls.LoadX509KeyPair(f.certFile, f.keyFile)
	} else {
		cert, err = sctpddp.GenerateCertificate()
	}
	if err != nil {
		return nil, false, "", fmt.Errorf("certificate: %v", err)
	}
	cfg.Certificate = &cert
	fp, err := sctpddp.CertificateFingerprint(cert)
	if err != nil {
		return nil, false, "", err
	}
	if f.fingerprint != "" {
		pin, _ := sctpddp.ParseFingerprint(f.fingerprint)
		cfg.PeerFingerprints = []sctpddp.Fingerprint{pin}
		return cfg, true, fp.String(), nil
	}
	// The listener accepts any client (clients check the listener);
	// a client without --fingerprint or --psk connects unauthenticated.
	cfg.InsecureSkipPeerVerification = true
	return cfg, false, fp.String(), nil
}

// pending is a connection request waiting for its queue pair.
type pending struct {
	peer string
	// accept starts qp on the connection.
	accept func(qp *rdmap.QueuePair) (*conn, error)
	reject func()
}

// listener accepts connections of either transport.
type listener struct {
	addr        net.Addr
	fingerprint string          // sctp:// with certificates
	sctpConfig  *sctpddp.Config // sctp://: the configuration it listens with
	accepts     chan *pending
	closeFn     func()
	done        chan struct{}
	once        sync.Once
	wg          sync.WaitGroup
}

func (l *listener) Addr() net.Addr { return l.addr }

// Accept returns the next connection request.
func (l *listener) Accept(ctx context.Context) (*pending, error) {
	select {
	case p := <-l.accepts:
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening and waits for the listener's goroutines.
// Established connections stay open; SCTP associations that carry none
// are closed.
func (l *listener) Close() {
	l.once.Do(func() {
		close(l.done)
		l.closeFn()
	})
	l.wg.Wait()
	for {
		select {
		case p := <-l.accepts:
			p.reject()
		default:
			return
		}
	}
}

func (l *listener) offer(p *pending) bool {
	select {
	case l.accepts <- p:
		return true
	case <-l.done:
		p.reject()
		return false
	}
}

// listen listens on ep. Warnings (an unauthenticated peer) go to stderr.
// listenRecorded listens on ep and, with --pcap, records what crosses
// every connection.
func listenRecorded(ctx context.Context, ep endpoint, f *linkFlags, stderr io.Writer) (*listener, *recorder, error) {
	var rec *recorder
	if f.pcap != "" {
		var err error
		if rec, err = newRecorder(f.pcap, ep.scheme); err != nil {
			return nil, nil, err
		}
	}
	l, err := listen(ctx, ep, f, rec, stderr)
	if err != nil {
		rec.Close()
		return nil, nil, fmt.Errorf("cannot listen on %s: %v", ep, err)
	}
	rec.setLocal(l.Addr())
	return l, rec, nil
}

func listen(ctx context.Context, ep endpoint, f *linkFlags, rec *recorder, stderr io.Writer) (*listener, error) {
	l := &listener{accepts: make(chan *pending), done: make(chan struct{})}
	if ep.scheme == "tcp" {
		return l, listenTCP(l, ep, f, rec)
	}
	cfg, auth, fp, err := f.sctpConfig(ep.addr, rec)
	if err != nil {
		return nil, err
	}
	if !auth {
		fmt.Fprintln(stderr, "iwarp: warning: clients are not authenticated (give --psk to both ends to authenticate them)")
	}
	sl, err := sctpddp.Listen(ctx, "udp", ep.addr, cfg)
	if err != nil {
		return nil, err
	}
	l.addr, l.fingerprint, l.sctpConfig = sl.Addr(), fp, cfg
	actx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	assocs := map[*sctpddp.Association]bool{}
	l.closeFn = func() {
		cancel()
		sl.Close()
		mu.Lock()
		for a := range assocs {
			a.Close()
		}
		mu.Unlock()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			a, err := sl.Accept(actx)
			if err != nil {
				return
			}
			mu.Lock()
			assocs[a] = true
			mu.Unlock()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() {
					mu.Lock()
					delete(assocs, a)
					mu.Unlock()
					a.Close()
				}()
				sessions := a.Sessions(0)
				var live sync.WaitGroup
				defer live.Wait()
				for {
					req, err := sessions.Accept(actx)
					if err != nil {
						return
					}
					live.Add(1)
					p := &pending{peer: a.RemoteAddr().String()}
					var once sync.Once
					p.reject = func() { once.Do(func() { req.Reject(nil, 0, 0); live.Done() }) }
					p.accept = func(qp *rdmap.QueuePair) (*conn, error) {
						s, err := req.Accept(qp, sctpddp.SessionConfig{})
						if err != nil {
							once.Do(live.Done)
							return nil, err
						}
						return &conn{info: sctpInfo(a, s, auth), qp: qp, after: func() { once.Do(live.Done) }}, nil
					}
					if !l.offer(p) {
						return
					}
				}
			}()
		}
	}()
	return l, nil
}

func mpaConfig(f *linkFlags) *mpa.Config {
	return &mpa.Config{Markers: f.markers, NoCRC: f.noCRC}
}

// listenTCP listens for MPA connections. With a recorder, each TCP
// connection goes through a loopback relay that records its octets:
// mpa's listener traces all its connections through one function, which
// cannot tell them apart.
func listenTCP(l *listener, ep endpoint, f *linkFlags, rec *recorder) error {
	inner := ep.addr
	var relay net.Listener
	if rec != nil {
		var err error
		if relay, err = net.Listen("tcp", ep.addr); err != nil {
			return err
		}
		inner = "127.0.0.1:0"
		if ip := relay.Addr().(*net.TCPAddr).IP; ip.To4() == nil && !ip.IsUnspecified() {
			inner = "[::1]:0"
		}
	}
	ml, err := mpa.Listen(context.Background(), "tcp", inner, mpaConfig(f))
	if err != nil {
		if relay != nil {
			relay.Close()
		}
		return err
	}
	l.addr = ml.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	var peers sync.Map // relay's address at the listener -> the real peer and local addresses
	if relay != nil {
		l.addr = relay.Addr()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			runRelay(ctx, relay, ml.Addr().String(), rec, &peers)
		}()
	}
	l.closeFn = func() {
		cancel()
		ml.Close()
		if relay != nil {
			relay.Close()
		}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			req, err := ml.Accept(ctx)
			if err != nil {
				return
			}
			peer := req.RemoteAddr()
			var local net.Addr
			if p, ok := peers.LoadAndDelete(peer.String()); ok {
				ends := p.([2]net.Addr)
				peer, local = ends[0], ends[1]
			}
			p := &pending{peer: peer.String()}
			p.reject = func() { req.Reject(nil, 0, 0) }
			p.accept = func(qp *rdmap.QueuePair) (*conn, error) {
				c, err := req.Accept(qp, nil)
				if err != nil {
					return nil, err
				}
				info := mpaInfo(c, peer)
				if local != nil {
					info.Local = local.String()
				}
				return &conn{info: info, qp: qp}, nil
			}
			if !l.offer(p) {
				return
			}
		}
	}()
	return nil
}

// runRelay accepts TCP connections on relay and joins each to a new
// connection to inner, recording what crosses. When ctx is done (the
// listener closes) it closes the connections still open.
func runRelay(ctx context.Context, relay net.Listener, inner string, rec *recorder, peers *sync.Map) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := relay.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", inner)
		if err != nil {
			c.Close()
			continue
		}
		peers.Store(d.LocalAddr().String(), [2]net.Addr{c.RemoteAddr(), c.LocalAddr()})
		tr := rec.tcpConn()
		tr.bind(c.RemoteAddr(), c.LocalAddr())
		wg.Add(3)
		var half sync.WaitGroup
		half.Add(2)
		pipe := func(dst, src net.Conn, fromClient bool) {
			defer wg.Done()
			defer half.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					tr.write(fromClient, buf[:n])
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		}
		go pipe(d, c, true)
		go pipe(c, d, false)
		stop := context.AfterFunc(ctx, func() { c.Close(); d.Close() })
		go func() {
			defer wg.Done()
			half.Wait()
			stop()
			c.Close()
			d.Close()
			tr.close()
		}()
	}
}

// dial connects qp to the listener at ep.
func dial(ctx context.Context, ep endpoint, f *linkFlags, rec *recorder, qp *rdmap.QueuePair, stderr io.Writer) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if ep.scheme == "tcp" {
		cfg := mpaConfig(f)
		var tr *tcpRecording
		if rec != nil {
			tr = rec.tcpConn()
			cfg.Trace = tr.write
		}
		c, err := mpa.Dial(ctx, "tcp", ep.addr, qp, cfg)
		if err != nil {
			if tr != nil {
				tr.discard()
			}
			return nil, describeDialErr(ep, err)
		}
		out := &conn{info: mpaInfo(c, c.RemoteAddr()), qp: qp}
		if tr != nil {
			tr.bind(c.LocalAddr(), c.RemoteAddr())
			out.after = tr.close
		}
		return out, nil
	}
	cfg, auth, _, err := f.sctpConfig(ep.addr, rec)
	if err != nil {
		return nil, err
	}
	if !auth {
		fmt.Fprintln(stderr, "iwarp: warning: the server is not authenticated (give --fingerprint or --psk)")
	}
	a, err := sctpddp.Dial(ctx, "udp", ep.addr, cfg)
	if err != nil {
		return nil, describeDialErr(ep, err)
	}
	s, err := sctpddp.Connect(ctx, a, 1, qp, sctpddp.SessionConfig{})
	if err != nil {
		a.Close()
		return nil, describeDialErr(ep, err)
	}
	return &conn{info: sctpInfo(a, s, auth), qp: qp, after: func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a.Shutdown(sctx)
	}}, nil
}

func describeDialErr(ep endpoint, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("connecting to %s: timed out", ep)
	}
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return fmt.Errorf("connecting to %s: %s", ep, msg)
}
