package linuxguest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmp is a QEMU Machine Protocol client on a unix socket: enough to run
// human monitor commands (hostfwd_add) while the guest runs.
type qmp struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// dialQMP connects to QEMU's QMP socket, which QEMU creates at start;
// it gives up when ctx ends or QEMU exits.
func dialQMP(ctx context.Context, path string, exited <-chan struct{}) (*qmp, error) {
	var conn net.Conn
	for {
		var err error
		conn, err = net.Dial("unix", path)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			return nil, errors.New("QEMU exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
	q := &qmp{conn: conn, r: bufio.NewReader(conn)}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer conn.SetDeadline(time.Time{})
	// The greeting, then capabilities negotiation.
	if _, err := q.read(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("QMP greeting: %w", err)
	}
	if _, err := q.execute("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	QMP   json.RawMessage `json:"QMP"`
}

func (q *qmp) read() (qmpReply, error) {
	var r qmpReply
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return r, err
	}
	err = json.Unmarshal(line, &r)
	return r, err
}

// execute runs a QMP command and returns its "return" value; events that
// arrive meanwhile are skipped.
func (q *qmp) execute(cmd string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := map[string]any{"execute": cmd}
	if args != nil {
		m["arguments"] = args
	}
	b, _ := json.Marshal(m)
	q.conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer q.conn.SetDeadline(time.Time{})
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		r, err := q.read()
		if err != nil {
			return nil, err
		}
		if r.Event != "" {
			continue
		}
		if r.Error != nil {
			return nil, fmt.Errorf("QMP %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		}
		return r.Return, nil
	}
}

// hmp runs a human monitor command and returns what it printed (empty for
// a hostfwd_add that worked).
func (q *qmp) hmp(line string) (string, error) {
	raw, err := q.execute("human-monitor-command", map[string]string{"command-line": line})
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

func (q *qmp) close() { q.conn.Close() }
