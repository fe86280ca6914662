package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarpgo/iwarp/bench/llp"
)

// hello is what the server tells a client first, on the control
// connection (and a re-run server on its first line of output): its
// credentials, in the clear, for a benchmark on one machine.
type hello struct {
	Control   string            `json:"control,omitempty"`
	Cert      []byte            `json:"cert"`
	Key       []byte            `json:"key"` // PKCS #8; the DTLS transports with certificates present the same one at both ends
	PSK       []byte            `json:"psk"`
	Listeners map[string]string `json:"listeners"`
}

// request is a control message from the client: "prepare" (a new
// counter for the next connection of the transport), "start" (the
// transfer begins), "end" (Sent bytes were sent: wait for them).
type request struct {
	Op        string `json:"op"`
	Transport string `json:"transport"`
	Sent      int64  `json:"sent,omitempty"`
	Lossy     bool   `json:"lossy,omitempty"`
	// Within bounds the wait for an "end" (the client's time left).
	Within time.Duration `json:"within,omitempty"`
}

// reply answers a request; for "end", what the receiver verified and
// the CPU time this process used since "start".
type reply struct {
	Err      string  `json:"err,omitempty"`
	Verified int64   `json:"verified"`
	Dups     int64   `json:"dups"`
	LastNano int64   `json:"last_ns"`
	CPU      float64 `json:"cpu_s"`
}

// server holds a listener for every transport and receives every
// connection, counting into the counter the client last prepared.
type server struct {
	sec       *llp.Security
	listeners map[string]llp.Listener

	done atomic.Bool // the listeners are closing

	mu  sync.Mutex // guards cur
	cur map[string]*llp.Counter
}

func newServer(ctx context.Context, host string) (*server, error) {
	sec, err := llp.NewSecurity()
	if err != nil {
		return nil, err
	}
	s := &server{sec: sec, listeners: make(map[string]llp.Listener), cur: make(map[string]*llp.Counter)}
	for _, t := range append(llp.All(), llp.Extra()...) {
		l, err := t.Listen(ctx, net.JoinHostPort(host, "0"), sec)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", t.Name, err)
		}
		s.listeners[t.Name] = l
		go s.accept(t.Name, l)
	}
	return s, nil
}

func (s *server) hello() hello {
	key, _ := x509.MarshalPKCS8PrivateKey(s.sec.Cert.PrivateKey)
	h := hello{Cert: s.sec.Cert.Certificate[0], Key: key, PSK: s.sec.PSK, Listeners: make(map[string]string)}
	for n, l := range s.listeners {
		h.Listeners[n] = l.Addr().String()
	}
	return h
}

func (s *server) counter(name string) *llp.Counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur[name]
	if c == nil {
		c = &llp.Counter{}
		s.cur[name] = c
	}
	return c
}

func (s *server) accept(name string, l llp.Listener) {
	for {
		r, err := l.Accept(context.Background())
		if err != nil {
			if s.done.Load() {
				return
			}
			log.Printf("llpbench server: %s: accept: %v", name, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := s.counter(name)
		go func() {
			if err := r.Receive(c); err != nil {
				c.Fail(err)
			}
			r.Close()
		}()
	}
}

// control serves one client's control connection.
func (s *server) control(c net.Conn) {
	defer c.Close()
	enc := json.NewEncoder(c)
	if err := enc.Encode(s.hello()); err != nil {
		return
	}
	sc := bufio.NewScanner(c)
	var cpu0 float64
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			enc.Encode(reply{Err: err.Error()})
			return
		}
		var rep reply
		switch req.Op {
		case "prepare":
			s.mu.Lock()
			s.cur[req.Transport] = &llp.Counter{}
			s.mu.Unlock()
		case "start":
			cpu0 = cpuSeconds()
		case "end":
			cnt := s.counter(req.Transport)
			quiet := llp.Stalled
			if req.Lossy {
				quiet = llp.Quiet
			}
			within := 2 * llp.Stalled
			if req.Within > 0 {
				within = min(within, req.Within)
			}
			ctx, cancel := context.WithTimeout(context.Background(), within)
			err := llp.Wait(ctx, cnt, req.Sent, quiet)
			cancel()
			rep = reply{Verified: cnt.Bytes(), Dups: cnt.Dups(), LastNano: cnt.Last().UnixNano(), CPU: cpuSeconds() - cpu0}
			if cnt.Last().IsZero() {
				rep.LastNano = 0
			}
			if err != nil {
				rep.Err = err.Error()
			}
		default:
			rep.Err = "unknown op " + req.Op
		}
		if err := enc.Encode(rep); err != nil {
			return
		}
	}
}

// serve runs a server whose control listener is at addr, and prints its
// hello (with the control address) as the first line of output. It ends
// when done closes.
func serve(addr string, done <-chan struct{}) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	s, err := newServer(ctx, host)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := s.hello()
	h.Control = l.Addr().String()
	b, _ := json.Marshal(h)
	fmt.Fprintf(os.Stdout, "%s\n", b)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go s.control(c)
		}
	}()
	<-done
	s.done.Store(true)
	l.Close()
	for _, ln := range s.listeners {
		ln.Close()
	}
	return nil
}

// security rebuilds the client's view of the server's credentials.
func (h hello) security() (*llp.Security, error) {
	key, err := x509.ParsePKCS8PrivateKey(h.Key)
	if err != nil {
		return nil, err
	}
	return llp.SecurityFrom(h.Cert, key, h.PSK)
}
