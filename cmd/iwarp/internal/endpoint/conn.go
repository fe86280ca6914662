package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// Info describes an established connection, for people and for the
// connected event.
type Info struct {
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

func (i Info) String() string {
	if i.Transport == "tcp" {
		return fmt.Sprintf("tcp %s -> %s, MPA rev %d, CRC %v, markers tx %v rx %v", i.Local, i.Peer, i.MPARevision, *i.CRC, *i.MarkersTx, *i.MarkersRx)
	}
	return fmt.Sprintf("sctp %s -> %s, DDP stream %d", i.Local, i.Peer, *i.SCTPStream)
}

func MPAInfo(c *mpa.Conn, peer net.Addr) Info {
	n := c.Negotiated()
	return Info{Transport: "tcp", Peer: peer.String(), Local: c.LocalAddr().String(),
		MPARevision: n.Revision, CRC: &n.CRC, MarkersTx: &n.MarkersTx, MarkersRx: &n.MarkersRx}
}

// Conn is an established connection carrying one queue pair.
type Conn struct {
	Info Info
	QP   *rdmap.QueuePair
	C    *iwarp.Conn // nil for a connection a test made with mpa.Client
	// ended is closed when the stream has stopped, at endedAt (nil for
	// a connection a test made).
	ended   chan struct{}
	endedAt time.Time
}

// MPA returns the MPA connection of a tcp:// Conn, nil otherwise.
func (c *Conn) MPA() *mpa.Conn {
	if c.C == nil {
		return nil
	}
	return c.C.MPA()
}

// Close closes the connection (draining what is queued, until ctx ends)
// and what it holds: the queue pair, the transport connection, a
// client's SCTP association.
func (c *Conn) Close(ctx context.Context) {
	if c.C != nil {
		c.C.Shutdown(ctx)
	} else {
		c.QP.Close(ctx)
	}
}

// PeerDeadTime is how the commands print the time a peer was found dead.
const PeerDeadTime = "15:04:05.000"

// watchEnd notes when the connection's stream stops.
func (c *Conn) watchEnd() {
	c.ended = make(chan struct{})
	go func() {
		<-c.C.Done()
		c.endedAt = time.Now()
		close(c.ended)
	}()
}

// PeerDead says whether the connection's stream ended because its peer
// went silent (iwarp.ErrPeerDead), when, and the error that says so.
func (c *Conn) PeerDead() (time.Time, error, bool) {
	if c.C == nil || c.ended == nil {
		return time.Time{}, nil, false
	}
	// An operation that failed as the stream stopped may be told
	// before the stream's end is: give it a moment.
	select {
	case <-c.ended:
	case <-time.After(100 * time.Millisecond):
		return time.Time{}, nil, false
	}
	if err := c.C.Err(); errors.Is(err, iwarp.ErrPeerDead) {
		return c.endedAt, err, true
	}
	return time.Time{}, nil, false
}

// Explain replaces err, an operation's failure on the connection, by
// "peer dead at TIME: ..." when the stream ended for that reason.
func (c *Conn) Explain(err error) error {
	if err == nil || c == nil {
		return err
	}
	if at, perr, ok := c.PeerDead(); ok {
		return fmt.Errorf("peer dead at %s: %v", at.Format(PeerDeadTime), perr)
	}
	if errors.Is(err, sctpddp.ErrPeerDead) {
		// The queue pair was closed since, and says only that.
		at := time.Now()
		if c.ended != nil {
			<-c.ended
			at = c.endedAt
		}
		return fmt.Errorf("peer dead at %s: nothing from %s: %v", at.Format(PeerDeadTime), c.Info.Peer, err)
	}
	return err
}

// infoOf describes an established connection.
func infoOf(c *iwarp.Conn, authenticated bool) Info {
	if m := c.MPA(); m != nil {
		return MPAInfo(m, c.RemoteAddr())
	}
	id := int(c.Session().ID())
	return Info{Transport: "sctp", Peer: c.RemoteAddr().String(), Local: c.LocalAddr().String(),
		SCTPStream: &id, Authenticated: &authenticated}
}
