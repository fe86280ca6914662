// Package endpoint is the iwarp command's transport layer: the flags
// that choose and secure a transport (MPA options for tcp://, DTLS
// authentication for sctp://, --pcap, --keylog), and the listeners and
// connections made from them, shared by serve, perf and rping.
//
//	var f endpoint.Flags
//	f.Register(fs)
//	fs.Parse(args)
//	u, err := endpoint.Parse(fs.Arg(0))
//	if err == nil {
//		err = f.Check(u, false)
//	}
//	c, err := endpoint.Dial(ctx, u, &f, nil, qp, os.Stderr)
package endpoint

import (
	"fmt"
	"strings"

	"github.com/iwarpgo/iwarp"
)

// UsageError marks an error in how the command was called: the command
// exits with status 2 and prints it on one line.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef formats a UsageError.
func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// URL is a parsed endpoint URL: tcp://host:port (MPA over TCP) or
// sctp://host:port (DDP over SCTP over DTLS over UDP).
type URL struct {
	Scheme string // "tcp" or "sctp"
	Addr   string // host:port
}

func (u URL) String() string { return u.Scheme + "://" + u.Addr }

// Parse parses an endpoint URL (iwarp.ParseURL). Its errors are usage
// errors.
func Parse(s string) (URL, error) {
	if s == "" {
		return URL{}, Usagef("missing endpoint URL (tcp://host:port or sctp://host:port)")
	}
	scheme, addr, err := iwarp.ParseURL(s)
	if err != nil {
		return URL{}, Usagef("%s", strings.TrimPrefix(err.Error(), "iwarp: "))
	}
	return URL{Scheme: scheme, Addr: addr}, nil
}
