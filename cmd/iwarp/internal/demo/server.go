// Package demo is the server of "iwarp demo": it serves the page and the
// browser peer (package web), the signaling WebSocket through which tabs
// pair and talk to a Go peer, and that Go peer: an rdmap queue pair per
// page, over a WebRTC data channel (DDP over SCTP, RFC 5043) whose UDP
// socket runs through an impaired network the page controls, or over MPA
// (RFC 5044) on a WebSocket when the page falls back to a byte stream.
//
// Signaling is a pairing, not a relay: a tab talks to another tab only
// after both agreed (a code shown in one, typed in the other), the
// server forwards messages only within a pair, and a tab is observed only
// with its consent (a code of its own). The server checks Host and
// Origin, bounds what each connection may make it hold and how fast, and
// closes idle and non-reading connections. docs/security.md has the
// list.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iwarpgo/iwarp/web"
)

// Config configures a Server. The zero values take the defaults.
type Config struct {
	// Assets are the page and the browser peer (web.Load).
	Assets web.Assets
	// Log receives a line per notable event (nil: discarded).
	Log io.Writer
	// Addr is the address the server serves on; Serve takes the
	// listener's when it is nil. Requests must name it (or, when it is a
	// loopback or unspecified address, a localhost form of it) in Host.
	Addr net.Addr
	// Hosts are further names a request's Host may give (with Addr's
	// port), for a server reached under a DNS name.
	Hosts []string
	// Impairment is the network a new Go peer starts with.
	Impairment Impairment

	MaxTabs       int           // signaling connections at once (default 32)
	MaxConns      int           // other HTTP connections at once; the oldest idle ones are closed beyond it (default 128)
	HeaderTimeout time.Duration // to read a request's header (default 5 s)
	IdleTimeout   time.Duration // an idle keep-alive connection is closed (default 30 s)
	WriteTimeout  time.Duration // to write one signaling message (default 5 s)
	PingInterval  time.Duration // a signaling connection is pinged, and closed when no pong comes (default 20 s)
	SendQueue     int           // signaling messages queued for one tab; a tab that lets it fill is closed (default 256)
	Rate          float64       // signaling messages a second one tab may send (default 100)
	Burst         int           // ... in a burst (default 200)
	// SendQueueBytes bounds the octets queued for one tab; a tab that
	// lets more pile up is closed (default 16 MiB). A message passed on
	// to another tab can be six times the 1 MiB a tab may send (JSON
	// writes "<" as "\u003c"): with SendQueue alone, two paired tabs that
	// relay and do not read would make the server hold over a GiB for
	// each.
	SendQueueBytes int
	// MaxRemoteCandidates bounds the ICE candidates of a page's offer
	// the Go peer uses (default 8); the others are ignored.
	MaxRemoteCandidates int
}

func (c *Config) defaults() {
	pos := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	pos(&c.MaxTabs, 32)
	pos(&c.MaxConns, 128)
	pos(&c.SendQueue, 256)
	pos(&c.SendQueueBytes, 16<<20)
	pos(&c.Burst, 200)
	pos(&c.MaxRemoteCandidates, 8)
	dur(&c.HeaderTimeout, 5*time.Second)
	dur(&c.IdleTimeout, 30*time.Second)
	dur(&c.WriteTimeout, 5*time.Second)
	dur(&c.PingInterval, 20*time.Second)
	if c.Rate <= 0 {
		c.Rate = 100
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Server is the demo's HTTP server.
type Server struct {
	cfg Config

	mu       sync.Mutex // guards the fields below
	host     net.IP     // the served address's IP
	port     string
	nextID   int
	nextPeer int
	tabs     map[int]*tab
	codes    map[string]*invite // pairing and observing codes
	tickets  map[string]*ticket // MPA connections the page asked for
	conns    map[net.Conn]*connInfo
	wg       sync.WaitGroup // one per signaling or MPA connection
	failed   int            // wrong codes in the current minute, all tabs
	failAt   time.Time
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

// New returns a server; Serve runs it.
func New(cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, tabs: map[int]*tab{}, codes: map[string]*invite{}, tickets: map[string]*ticket{}, conns: map[net.Conn]*connInfo{}}
	if cfg.Addr != nil {
		s.setAddr(cfg.Addr)
	}
	return s
}

func (s *Server) setAddr(a net.Addr) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return
	}
	s.mu.Lock()
	s.host, s.port = net.ParseIP(host), port
	s.mu.Unlock()
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "iwarp demo: "+format+"\n", args...)
}

// Handler returns the server's routes, with the Host check in front.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	mux.HandleFunc("GET /mpa", s.serveMPA)
	mux.HandleFunc("GET /", s.serveAsset)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowedHost(r.Host) {
			// DNS rebinding: a page of another site, resolved to this
			// address, names its own host.
			http.Error(w, "this server answers only to its own address (Host "+strconv.Quote(r.Host)+" refused)", http.StatusMisdirectedRequest)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.allowedOrigin(o) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// allowedHost reports whether a request's Host names this server: its
// address, or a loopback form of it when it serves on loopback (or on
// every interface), or one of Config.Hosts; with the served port.
func (s *Server) allowedHost(hostport string) bool {
	s.mu.Lock()
	ip, port := s.host, s.port
	s.mu.Unlock()
	if ip == nil {
		return false
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = hostport, "80"
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
	}
	if p != port {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range s.cfg.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	local := ip.IsLoopback() || ip.IsUnspecified()
	if host == "localhost" {
		return local
	}
	hip := net.ParseIP(host)
	if hip == nil {
		return false
	}
	switch {
	case hip.Equal(ip):
		return true
	case hip.IsLoopback():
		return local
	case ip.IsUnspecified():
		return isLocalIP(hip)
	}
	return false
}

// allowedOrigin reports whether a request's Origin is a page of this
// server.
func (s *Server) allowedOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	h := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			h = net.JoinHostPort(u.Hostname(), "443")
		} else {
			h = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	return s.allowedHost(h)
}

func isLocalIP(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// Serve serves on ln until ctx ends, then closes every connection and
// Go peer.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.host == nil {
		s.setAddr(ln.Addr())
	}
	base, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnState:         s.connState,
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		cancel()
		s.wg.Wait()
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	cancel() // ends the signaling connections (hijacked, so Shutdown does not wait for them)
	err := srv.Shutdown(sctx)
	s.wg.Wait()
	<-errc
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// connState bounds the HTTP connections that are not WebSockets: beyond
// MaxConns, the ones idle longest (waiting for a first request, or
// between requests) are closed, so that a flood of idle connections
// cannot keep a page out. Header and idle timeouts close the rest.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle, http.StateActive:
		ci := s.conns[c]
		if ci == nil {
			ci = &connInfo{}
			s.conns[c] = ci
		}
		ci.state, ci.since = st, time.Now()
	case http.StateHijacked, http.StateClosed:
		delete(s.conns, c)
		return
	}
	for len(s.conns) > s.cfg.MaxConns {
		var oldest net.Conn
		var at time.Time
		for oc, ci := range s.conns {
			if oc == c || ci.state == http.StateActive {
				continue
			}
			if oldest == nil || ci.since.Before(at) {
				oldest, at = oc, ci.since
			}
		}
		if oldest == nil {
			return
		}
		delete(s.conns, oldest)
		_ = oldest.Close()
	}
}
