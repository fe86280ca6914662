package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/iwarpgo/iwarp"
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

// parseEndpoint parses an endpoint URL (iwarp.ParseURL). Its errors are
// usage errors.
func parseEndpoint(s string) (endpoint, error) {
	if s == "" {
		return endpoint{}, usagef("missing endpoint URL (tcp://host:port or sctp://host:port)")
	}
	scheme, addr, err := iwarp.ParseURL(s)
	if err != nil {
		return endpoint{}, usagef("%s", strings.TrimPrefix(err.Error(), "iwarp: "))
	}
	return endpoint{scheme: scheme, addr: addr}, nil
}

// linkFlags are the transport options shared by serve and perf.
type linkFlags struct {
	markers     bool
	noCRC       bool
	fingerprint string
	psk         string
	pskIdentity string
	insecureUDP bool
	// insecureSkipVerify lets an sctp:// client connect to a server it
	// cannot verify (no --fingerprint, no --psk).
	insecureSkipVerify bool
	certFile           string
	keyFile            string
	pcap               string
	keylog             string
	deadPeer           time.Duration
	// mpa, when set, is the whole MPA configuration (a command with MPA
	// flags of its own: rping); its PrivateData goes with the set-up
	// over either transport.
	mpa *mpa.Config
	// refused, when set, hears of each connection the transport's
	// listener refuses before the command sees it (its peer or
	// startup limits, a DTLS handshake evicted; mpa.Config.Refused,
	// sctpddp.Config.Refused).
	refused func(remote net.Addr, why error)
}

// mpaConfig returns a fresh MPA configuration for a connection.
func (f *linkFlags) mpaConfig() *mpa.Config {
	if f.mpa != nil {
		c := *f.mpa
		return &c
	}
	return &mpa.Config{Markers: f.markers, NoCRC: f.noCRC}
}

func (f *linkFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.markers, "markers", false, "tcp://: ask the peer for MPA Markers (RFC 5044 §5)")
	fs.BoolVar(&f.noCRC, "no-crc", false, "tcp://: ask for no MPA CRC32c (used only if both ends ask)")
	fs.StringVar(&f.fingerprint, "fingerprint", "", "sctp:// client: the server certificate's SHA-256 fingerprint (AB:CD:...) to pin")
	fs.StringVar(&f.psk, "psk", "", "sctp://: a pre-shared key (text) given to both ends instead of certificates")
	fs.StringVar(&f.pskIdentity, "psk-identity", "iwarp", "sctp://: the name of the pre-shared key")
	fs.BoolVar(&f.insecureSkipVerify, "insecure-skip-verify", false, "sctp:// client: INSECURE: connect to any server, without --fingerprint or --psk (the traffic is encrypted, but the server is unknown)")
	fs.BoolVar(&f.insecureUDP, "insecure-udp", false, "sctp://: INSECURE: SCTP over plain UDP (RFC 6951) without DTLS, so no authentication and no encryption; for Linux kernel SCTP and usrsctp peers in labs and tests")
	fs.StringVar(&f.certFile, "cert", "", "sctp:// listener: PEM certificate file (default: a fresh self-signed one)")
	fs.StringVar(&f.keyFile, "key", "", "sctp:// listener: PEM private key file for --cert")
	fs.StringVar(&f.pcap, "pcap", "", "record the session(s) as a pcap capture in `FILE`")
	fs.DurationVar(&f.deadPeer, "dead-peer", 0, "sctp://: end a connection after this long without a word from the peer (0: 30s, the library's default)")
	fs.StringVar(&f.keylog, "keylog", "", "sctp://: append the DTLS keys to `FILE` (NSS key log) for Wireshark to decrypt a capture")
}

func (f *linkFlags) check(ep endpoint, listening bool) error {
	if f.fingerprint != "" && f.psk != "" {
		return usagef("--fingerprint and --psk are two ways to authenticate the peer: give one")
	}
	if f.insecureUDP && (ep.scheme == "tcp" || f.fingerprint != "" || f.psk != "" || f.certFile != "" || f.keylog != "") {
		return usagef("--insecure-udp is sctp:// without DTLS: it takes no --fingerprint, --psk, --cert, --key or --keylog")
	}
	if f.insecureSkipVerify && (listening || ep.scheme == "tcp" || f.fingerprint != "" || f.psk != "" || f.insecureUDP) {
		return usagef("--insecure-skip-verify is for an sctp:// client that has neither --fingerprint nor --psk")
	}
	if ep.scheme == "sctp" && !listening && f.fingerprint == "" && f.psk == "" && !f.insecureUDP && !f.insecureSkipVerify {
		return usagef("an sctp:// client verifies its server: give --fingerprint (the listener prints it) or --psk (the same on both ends); --insecure-skip-verify connects to any server")
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
	if ep.scheme == "tcp" && f.deadPeer != 0 {
		return usagef("--dead-peer applies to sctp:// endpoints only (over tcp:// the kernel's TCP timers decide)")
	}
	if f.deadPeer < 0 {
		return usagef("--dead-peer must not be negative")
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

// conn is an established connection carrying one queue pair.
type conn struct {
	info connInfo
	qp   *rdmap.QueuePair
	c    *iwarp.Conn // nil for a connection a test made with mpa.Client
	// ended is closed when the stream has stopped, at endedAt (nil for
	// a connection a test made).
	ended   chan struct{}
	endedAt time.Time
}

// mpa returns the MPA connection of a tcp:// conn, nil otherwise.
func (c *conn) mpa() *mpa.Conn {
	if c.c == nil {
		return nil
	}
	return c.c.MPA()
}

// close closes the connection (draining what is queued, until ctx ends)
// and what it holds: the queue pair, the transport connection, a
// client's SCTP association.
func (c *conn) close(ctx context.Context) {
	if c.c != nil {
		c.c.Shutdown(ctx)
	} else {
		c.qp.Close(ctx)
	}
}

// peerDeadTime is how the commands print the time a peer was found dead.
const peerDeadTime = "15:04:05.000"

// watchEnd notes when the connection's stream stops.
func (c *conn) watchEnd() {
	c.ended = make(chan struct{})
	go func() {
		<-c.c.Done()
		c.endedAt = time.Now()
		close(c.ended)
	}()
}

// peerDead says whether the connection's stream ended because its peer
// went silent (iwarp.ErrPeerDead), when, and the error that says so.
func (c *conn) peerDead() (time.Time, error, bool) {
	if c.c == nil || c.ended == nil {
		return time.Time{}, nil, false
	}
	// An operation that failed as the stream stopped may be told
	// before the stream's end is: give it a moment.
	select {
	case <-c.ended:
	case <-time.After(100 * time.Millisecond):
		return time.Time{}, nil, false
	}
	if err := c.c.Err(); errors.Is(err, iwarp.ErrPeerDead) {
		return c.endedAt, err, true
	}
	return time.Time{}, nil, false
}

// explain replaces err, an operation's failure on the connection, by
// "peer dead at TIME: ..." when the stream ended for that reason.
func (c *conn) explain(err error) error {
	if err == nil || c == nil {
		return err
	}
	if at, perr, ok := c.peerDead(); ok {
		return fmt.Errorf("peer dead at %s: %v", at.Format(peerDeadTime), perr)
	}
	if errors.Is(err, sctpddp.ErrPeerDead) {
		// The queue pair was closed since, and says only that.
		at := time.Now()
		if c.ended != nil {
			<-c.ended
			at = c.endedAt
		}
		return fmt.Errorf("peer dead at %s: nothing from %s: %v", at.Format(peerDeadTime), c.info.Peer, err)
	}
	return err
}

// infoOf describes an established connection.
func infoOf(c *iwarp.Conn, authenticated bool) connInfo {
	if m := c.MPA(); m != nil {
		return mpaInfo(m, c.RemoteAddr())
	}
	id := int(c.Session().ID())
	return connInfo{Transport: "sctp", Peer: c.RemoteAddr().String(), Local: c.LocalAddr().String(),
		SCTPStream: &id, Authenticated: &authenticated}
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
func (f *linkFlags) sctpConfig(addr string, listening bool, rec *recorder) (*sctpddp.Config, bool, string, error) {
	cfg := &sctpddp.Config{MTU: sctpMTU(addr), DeadPeerTimeout: f.deadPeer}
	if rec != nil {
		cfg.Trace = rec.sctpTrace
	}
	if f.insecureUDP {
		cfg.InsecurePlainUDP = true
		return cfg, false, "", nil
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
	if listening {
		// The listener authenticates itself only: clients pin its
		// fingerprint, and it accepts any client.
		cfg.AcceptAnyClient = true
		return cfg, false, fp.String(), nil
	}
	// A client with --insecure-skip-verify does not verify the listener:
	// it says so (dial's warning).
	cfg.InsecureSkipPeerVerification = true
	return cfg, false, fp.String(), nil
}

// warnInsecure says loudly, under --insecure-udp, that nothing protects
// the traffic, and reports whether it did.
func (f *linkFlags) warnInsecure(stderr io.Writer) bool {
	if f.insecureUDP {
		fmt.Fprintln(stderr, "iwarp: WARNING: INSECURE: --insecure-udp runs SCTP over plain UDP without DTLS: no authentication, no encryption; anyone on the path can read, inject and forge this traffic")
	}
	return f.insecureUDP
}

// pending is a connection request waiting for its queue pair.
type pending struct {
	peer string
	req  *iwarp.Request
	l    *listener
}

// accept starts qp on the connection, answering with the listener's
// private data.
func (p *pending) accept(ctx context.Context, qp *rdmap.QueuePair) (*conn, error) {
	return p.acceptWith(ctx, qp, p.l.privateData)
}

// acceptWith starts qp on the connection, answering with privateData.
func (p *pending) acceptWith(ctx context.Context, qp *rdmap.QueuePair, privateData []byte) (*conn, error) {
	c, err := p.req.Accept(ctx, qp, privateData)
	if err != nil {
		return nil, err
	}
	info := infoOf(c, p.l.authenticated)
	info.Peer = p.peer
	out := &conn{info: info, qp: qp, c: c}
	out.watchEnd()
	return out, nil
}

func (p *pending) reject() { p.req.Reject(nil) }

// listener accepts connections of either transport (package iwarp's
// Listener).
type listener struct {
	l             *iwarp.Listener
	addr          net.Addr
	fingerprint   string          // sctp:// with certificates
	sctpConfig    *sctpddp.Config // sctp://: the configuration it listens with
	authenticated bool            // sctp://: clients are authenticated
	privateData   []byte          // what Accept answers with
}

func (l *listener) Addr() net.Addr { return l.addr }

// Accept returns the next connection request.
func (l *listener) Accept(ctx context.Context) (*pending, error) {
	req, err := l.l.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &pending{peer: req.RemoteAddr().String(), req: req, l: l}, nil
}

// Close stops listening; established connections stay open.
func (l *listener) Close() { l.l.Close() }

// listenRecorded listens on ep and, with --pcap, records what crosses
// every connection. Warnings (unauthenticated peers) go to stderr.
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

// listen listens on ep, recording its connections with a recorder.
func listen(ctx context.Context, ep endpoint, f *linkFlags, rec *recorder, stderr io.Writer) (*listener, error) {
	l := &listener{}
	cfg := &iwarp.Config{}
	if ep.scheme == "tcp" {
		cfg.MPA = f.mpaConfig()
		if f.refused != nil {
			cfg.MPA.Refused = f.refused
		}
		l.privateData = cfg.MPA.PrivateData
		if rec != nil {
			cfg.MPA.Trace = rec.c.MPATrace(true)
		}
	} else {
		scfg, auth, fp, err := f.sctpConfig(ep.addr, true, rec)
		if err != nil {
			return nil, err
		}
		if !auth && !f.warnInsecure(stderr) {
			fmt.Fprintln(stderr, "iwarp: note: clients are not authenticated: they pin this listener's fingerprint, and any client is accepted (give --psk to both ends to authenticate both)")
		}
		if f.refused != nil {
			scfg.Refused = f.refused
		}
		cfg.SCTP, l.sctpConfig, l.authenticated, l.fingerprint = scfg, scfg, auth, fp
		if f.mpa != nil {
			l.privateData = f.mpa.PrivateData
		}
	}
	il, err := iwarp.Listen(ctx, ep.String(), cfg)
	if err != nil {
		return nil, err
	}
	l.l, l.addr = il, il.Addr()
	return l, nil
}

// dial connects qp to the listener at ep.
func dial(ctx context.Context, ep endpoint, f *linkFlags, rec *recorder, qp *rdmap.QueuePair, stderr io.Writer) (*conn, error) {
	cfg := &iwarp.Config{ConnectTimeout: 15 * time.Second}
	auth := true
	if ep.scheme == "tcp" {
		cfg.MPA = f.mpaConfig()
		cfg.PrivateData = cfg.MPA.PrivateData
		if rec != nil {
			cfg.MPA.Trace = rec.c.MPATrace(false)
		}
	} else {
		scfg, ok, _, err := f.sctpConfig(ep.addr, false, rec)
		if err != nil {
			return nil, err
		}
		if auth = ok; !auth && !f.warnInsecure(stderr) {
			fmt.Fprintln(stderr, "iwarp: WARNING: --insecure-skip-verify: the server is not authenticated (give --fingerprint or --psk to verify it)")
		}
		cfg.SCTP = scfg
		if f.mpa != nil {
			cfg.PrivateData = f.mpa.PrivateData
		}
	}
	c, err := iwarp.Dial(ctx, ep.String(), qp, cfg)
	if err != nil {
		return nil, describeDialErr(ep, f, err)
	}
	out := &conn{info: infoOf(c, auth), qp: qp, c: c}
	out.watchEnd()
	return out, nil
}

func describeDialErr(ep endpoint, f *linkFlags, err error) error {
	switch {
	case errors.Is(err, iwarp.ErrUnreachable) && errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connecting to %s: nothing listens there (connection refused): start the server, or check the port", ep)
	case errors.Is(err, iwarp.ErrUnreachable):
		return fmt.Errorf("connecting to %s: nobody answers (the host drops the packets, or is not there)", ep)
	case errors.Is(err, sctpddp.ErrPSKMismatch):
		return fmt.Errorf("connecting to %s: the server holds another pre-shared key: give both ends the same --psk", ep)
	case errors.Is(err, sctpddp.ErrPSKIdentity):
		return fmt.Errorf("connecting to %s: the server does not know --psk-identity %q", ep, f.pskIdentity)
	case errors.Is(err, sctpddp.ErrFingerprintMismatch):
		return fmt.Errorf("connecting to %s: the server's certificate is not the --fingerprint given: %v", ep, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("connecting to %s: timed out", ep)
	case errors.Is(err, iwarp.ErrRejected) && ep.scheme == "tcp":
		return fmt.Errorf("connecting to %s: the server rejected the connection (MPA Reply with R=1)", ep)
	case errors.Is(err, iwarp.ErrRejected):
		return fmt.Errorf("connecting to %s: the server rejected the connection", ep)
	}
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return fmt.Errorf("connecting to %s: %s", ep, msg)
}
