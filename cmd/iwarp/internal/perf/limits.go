package perf

import (
	"errors"
	"fmt"
	"time"

	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/admission"
)

// Limits bound what clients can make a Server hold. The server sizes
// nothing from a client's word alone: every region and buffer a hello
// asks for is counted against the connection's and the server's budgets
// before it is allocated, and a hello beyond them is refused. Zero fields
// take the defaults.
type Limits struct {
	// MaxConns is how many perf connections are served at once (16).
	MaxConns int
	// MaxConnsPerPeer is how many of them may come from one peer, an
	// IPv4 address or an IPv6 /64 (4): one peer can hold at most a
	// quarter of the connections and of the memory budget.
	MaxConnsPerPeer int
	// MemBudget is the octets of regions, receive buffers and raw
	// transfer buffers the server holds for all connections together,
	// each connection's own costs (ConnOverhead) included (512 MiB).
	MemBudget int64
	// ConnBudget is the most one connection may hold (64 MiB): enough
	// for every test up to MaxSize.
	ConnBudget int64
	// MaxRecvBuffers is the most receive buffers a client may ask the
	// server to post (256).
	MaxRecvBuffers int
	// HelloTimeout bounds the wait for a connection's hello, and for a
	// raw connection's header (10 s).
	HelloTimeout time.Duration
	// IdleTimeout closes a connection, or a raw transfer, on which
	// nothing has arrived or left for that long (1 min).
	IdleTimeout time.Duration
}

// The defaults of Limits.
const (
	DefaultMaxConns        = 16
	DefaultMaxConnsPerPeer = 4
	DefaultMemBudget       = 512 << 20
	DefaultConnBudget      = 64 << 20
	DefaultMaxRecvBuffers  = 256
	DefaultHelloTimeout    = 10 * time.Second
	DefaultIdleTimeout     = time.Minute
)

// MaxSize is the largest message a test may move.
const MaxSize = 8 << 20

// ConnOverhead is what a connection is counted for before its hello: its
// queue pair, completion queues, control buffers and transport buffers
// (an idle MPA connection measured about 0.3 MiB, both ends together:
// TestPerfServerMemory).
const ConnOverhead = 1 << 20

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxConns, DefaultMaxConns)
	def(&l.MaxConnsPerPeer, DefaultMaxConnsPerPeer)
	def(&l.MaxRecvBuffers, DefaultMaxRecvBuffers)
	if l.MemBudget <= 0 {
		l.MemBudget = DefaultMemBudget
	}
	if l.ConnBudget <= 0 {
		l.ConnBudget = DefaultConnBudget
	}
	if l.HelloTimeout <= 0 {
		l.HelloTimeout = DefaultHelloTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// Check reports limits that cannot serve a connection.
func (l Limits) Check() error {
	l = l.withDefaults()
	if l.ConnBudget+ConnOverhead > l.MemBudget {
		return fmt.Errorf("a memory budget of %d octets does not hold one connection's budget of %d and its %d octets of overhead", l.MemBudget, l.ConnBudget, ConnOverhead)
	}
	return nil
}

// RefusalCode says why a server refused a client.
type RefusalCode uint8

// The refusals.
const (
	RefusedConns        RefusalCode = 1 // MaxConns connections already
	RefusedPeerConns    RefusalCode = 2 // MaxConnsPerPeer from the client's address already
	RefusedConnBudget   RefusalCode = 3 // the hello asks more than ConnBudget
	RefusedServerBudget RefusalCode = 4 // the hello asks more than MemBudget has left
	RefusedBadHello     RefusalCode = 5 // the hello is malformed or out of range
)

// RefusedError is a refusal by the server, as the client reports it.
type RefusedError struct {
	Code  RefusalCode
	Asked uint64 // what the client asked for (octets, or connections)
	Limit uint64 // the limit it met (octets free, or connections)
}

func (e *RefusedError) Error() string {
	switch e.Code {
	case RefusedConns:
		return fmt.Sprintf("the server refused: it serves %d connections already (its --max-conns)", e.Limit)
	case RefusedPeerConns:
		return fmt.Sprintf("the server refused: it serves %d connections from this address already (its --max-conns-per-peer)", e.Limit)
	case RefusedConnBudget:
		return fmt.Sprintf("the server refused: the test needs %s of memory there, more than its per-connection budget of %s (its --conn-budget)", octets(e.Asked), octets(e.Limit))
	case RefusedServerBudget:
		return fmt.Sprintf("the server refused: the test needs %s of memory there and only %s of its budget is free (its --mem-budget); try again later", octets(e.Asked), octets(e.Limit))
	case RefusedBadHello:
		return "the server refused: it does not take this test (a size, operation or buffer count out of its range)"
	}
	return fmt.Sprintf("the server refused (code %d)", e.Code)
}

// octets formats n with a binary unit.
func octets(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d octets", n)
}

// refusedBy is the RefusedError a client is told of an admission refusal.
func refusedBy(err error) *RefusedError {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return nil
	}
	switch r.Limit {
	case admission.Conns:
		return &RefusedError{Code: RefusedConns, Asked: 1, Limit: uint64(r.Max)}
	case admission.PeerConns:
		return &RefusedError{Code: RefusedPeerConns, Asked: 1, Limit: uint64(r.Max)}
	}
	return &RefusedError{Code: RefusedServerBudget, Asked: uint64(r.Asked), Limit: uint64(r.Free())}
}

// newAdmission is the admission of a Server with lim.
func newAdmission(lim Limits) *admission.Admission {
	return admission.New(admission.Limits{MaxConns: lim.MaxConns, MaxConnsPerPeer: lim.MaxConnsPerPeer, MemBudget: lim.MemBudget})
}
