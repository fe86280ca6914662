//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwarpgo/iwarp"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/perf"
	"github.com/iwarpgo/iwarp/cmd/iwarp/internal/rping"
	"github.com/iwarpgo/iwarp/ddp"
	"github.com/iwarpgo/iwarp/internal/waitfor"
	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/rdmap"
	"github.com/iwarpgo/iwarp/sctpddp"
	"github.com/iwarpgo/iwarp/sctpddp/wire"
	"github.com/iwarpgo/iwarp/term"
)

// TestHostile plays a misbehaving peer against the built "iwarp serve",
// "iwarp rping -s -P" and "iwarp perf --listen", over tcp:// and sctp://
// (with --psk), beside a well-behaved client doing real work on the same
// server throughout: RDMA Writes read back and compared (serve), rping's
// pings with their data checked (rping -V), "iwarp perf --connect" runs
// (perf). The hostile peer, from another loopback address, speaks the
// protocol as far as it needs to (the LLP's startup, the command's
// first messages) and then, one connection per case:
//
//   - answers a Read Request twice (over sctp:// the later DDP-SSN
//     first), late, never (the connection closed, or held to the end of
//     the round beside the other cases), with half the data, in two
//     segments the Last one first, or with a bit flipped (rping, the one
//     command that sends Read Requests);
//   - sends a Read Response, an Atomic Response nobody asked for, or
//     replays a real one (serve's Read Response, perf's Atomic Response:
//     no command sends Atomic Requests, so a second Response to one is
//     this replay), and a Send twice (serve);
//   - sends serve as many Read Requests as its IRD, and four times as
//     many, and reads the Responses only a second later;
//   - flips a bit in a segment after MPA's CRC is computed, or in the
//     plaintext handed to DTLS (it arrives authenticated, and malformed);
//   - sends a segment shorter than its DDP Header, or half an FPDU and
//     goes;
//   - abandons connections in the middle of their startup (TCP, MPA,
//     DTLS, the DDP Stream Session) and reconnects over and over.
//
// It checks that the process stays up (no exit, nothing of a crash on its
// stderr), that every one of the good client's sessions succeeds with
// correct data and none waits long, that every misbehaviour gets the
// protocol's answer (a Terminate, the connection closed, or the next
// message of the command's protocol where the misbehaviour is legal),
// that the peak VmRSS stays within what the servers' documented limits
// allow, and, at the end, the goroutines (counted in the SIGQUIT dump).
//
// Without IWARP_HOSTILE it runs the cases in rounds for hostileShort,
// each at least once. IWARP_HOSTILE (a Go duration) runs them for that
// long per command (its tcp:// and sctp:// servers at once), and then
// checks that the server's RSS has not grown since the first rounds:
// scripts/soak-hostile.sh.
func TestHostile(t *testing.T) {
	var hold time.Duration
	if s := os.Getenv("IWARP_HOSTILE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("IWARP_HOSTILE=%q: %v", s, err)
		}
		hold = d
	}
	for _, cmd := range []string{"serve", "rping", "perf"} {
		t.Run(cmd, func(t *testing.T) {
			for _, scheme := range []string{"tcp", "sctp"} {
				t.Run(scheme, func(t *testing.T) {
					t.Parallel()
					runHostile(t, cmd, scheme, hold)
				})
			}
		})
	}
}

// hostilePSK is the key of the sctp:// servers (soakSCTPConfig's).
const hostilePSK = soakPSK

// rpingHostileSize is rping's -S: the Read Responses are large enough
// for the relay to tell their datagrams from SCTP's own (holdAbove), in
// halves too.
const rpingHostileSize = 2000

// target is one served command and what the hostile peer knows of it.
type target struct {
	cmd, scheme string
	c           *child
	addr        string // host:port of its listener
	// start does what the command's protocol asks before it has state
	// worth attacking; it returns the session, ready.
	start func(ctx context.Context, l link) (*hsess, error)
	// good runs one session of the well-behaved client and returns the
	// operations it completed with correct data.
	good func(ctx context.Context) (int, error)

	mu   sync.Mutex // guards held
	held []link     // connections kept open unanswered until the round ends
}

// hold keeps l open until the round ends (release).
func (tg *target) hold(l link) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.held = append(tg.held, l)
}

// release closes the connections held.
func (tg *target) release() int {
	tg.mu.Lock()
	held := tg.held
	tg.held = nil
	tg.mu.Unlock()
	for _, l := range held {
		l.close()
	}
	return len(held)
}

// hsess is a hostile connection after the command's first messages.
type hsess struct {
	link
	msn [rdmap.NumQueues]uint32 // the last MSN sent on each queue
	adv rdmap.RemoteBuffer      // serve's advertisement, perf's advert
	rr  rdmap.ReadRequest       // rping's Read Request
	// gone, if set, is closed when the server's process has exited:
	// nothing will answer then.
	gone <-chan struct{}
}

// sendMsg sends a one-segment untagged message on queue qn.
func (s *hsess) sendMsg(op rdmap.Opcode, qn uint32, payload []byte) error {
	s.msn[qn]++
	return s.send(untaggedSeg(op, qn, s.msn[qn], 0, true, payload))
}

// next returns the next segment of the server that is not a Terminate;
// a Terminate or the stream's end is an error.
func (s *hsess) next(ctx context.Context) ([]byte, rdmap.Opcode, ddp.Header, []byte, error) {
	seg, err := s.recv(ctx)
	if err != nil {
		return nil, 0, ddp.Header{}, nil, err
	}
	if e, ok := asTerminate(seg); ok {
		return nil, 0, ddp.Header{}, nil, fmt.Errorf("a Terminate: %v", e)
	}
	op, h, body, ok := rdmapOp(seg)
	if !ok {
		return nil, 0, h, nil, errors.New("a segment that does not parse")
	}
	return seg, op, h, body, nil
}

// answerWait bounds the wait for the server's answer to a misbehaviour.
const answerWait = 10 * time.Second

// await reads what the server answers until a Terminate or the stream's
// end, skipping other segments, and says which. A segment that ok (when
// set) accepts is the answer instead, or, with thenEnd, the answer's
// first part: a Terminate or the end must follow.
func (s *hsess) await(ok func(op rdmap.Opcode, h ddp.Header, body []byte) bool, thenEnd bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), answerWait)
	defer cancel()
	if s.gone != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-s.gone:
				cancel()
			case <-stop:
			}
		}()
	}
	first := ""
	for {
		seg, err := s.recv(ctx)
		if errors.Is(err, errEnded) {
			return first + "closed", nil
		}
		if err != nil {
			select {
			case <-s.gone:
				return "", fmt.Errorf("the server's process exited before it answered (%q so far)", first)
			default:
			}
			return "", fmt.Errorf("no answer within %v (%q so far): %v", answerWait, first, err)
		}
		if e, isTerm := asTerminate(seg); isTerm {
			return first + "Terminate " + e.Name(), nil
		}
		if op, h, body, parsed := rdmapOp(seg); parsed && ok != nil && ok(op, h, body) {
			if !thenEnd {
				return "answered: " + op.String(), nil
			}
			first, ok = "answered: "+op.String()+", then ", nil
		}
	}
}

// terminated accepts an await's answer that ends in a Terminate or a
// close.
func terminated(ans string) bool {
	_, last, _ := strings.Cut(ans, ", then ")
	if last == "" {
		last = ans
	}
	return strings.HasPrefix(last, "Terminate") || last == "closed"
}

// hostileCase is one misbehaviour; it returns what the server answered,
// or why that was not the protocol's answer.
type hostileCase struct {
	name string
	cmds string // the commands it applies to
	run  func(ctx context.Context, tg *target) (string, error)
}

func (tg *target) dial(ctx context.Context) (link, error) {
	if tg.scheme == "tcp" {
		return dialMPA(ctx, tg.addr)
	}
	return dialSCTP(ctx, tg.addr)
}

// errRefused is a connection the server refused: MPA's Reply with R
// set, a DDP Stream Session Reject, perf's refusal of a hello. The
// hostile peer's previous connections may not all have been given back
// yet (the server sees a close a moment after it is made).
var errRefused = errors.New("refused")

// session dials and runs the command's start, again for a few seconds
// while the server refuses it.
func (tg *target) session(ctx context.Context) (*hsess, error) {
	var s *hsess
	var err error
	waitfor.Every(5*time.Second, 100*time.Millisecond, func() bool {
		s, err = tg.sessionOnce(ctx)
		return !errors.Is(err, errRefused)
	})
	return s, err
}

func (tg *target) sessionOnce(ctx context.Context) (*hsess, error) {
	l, err := tg.dial(ctx)
	var re *ddp.RejectedError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("%w: %v", errRefused, err)
	}
	if err != nil {
		return nil, err
	}
	s, err := tg.start(ctx, l)
	if err != nil {
		l.close()
		return nil, err
	}
	s.gone = tg.c.done
	return s, nil
}

// misbehave opens a session, runs bad, and returns what the server
// answered if accept takes it.
func (tg *target) misbehave(ctx context.Context, bad func(s *hsess) error, ok func(op rdmap.Opcode, h ddp.Header, body []byte) bool, accept func(string) bool) (string, error) {
	return tg.misbehaveThen(ctx, bad, ok, false, accept)
}

// misbehaveThen is misbehave whose accepted segment, with thenEnd, must
// be followed by a Terminate or the stream's end.
func (tg *target) misbehaveThen(ctx context.Context, bad func(s *hsess) error, ok func(op rdmap.Opcode, h ddp.Header, body []byte) bool, thenEnd bool, accept func(string) bool) (string, error) {
	s, err := tg.session(ctx)
	if err != nil {
		return "", fmt.Errorf("starting: %w", err)
	}
	defer s.close()
	if err := bad(s); err != nil {
		return "", fmt.Errorf("sending: %w", err)
	}
	ans, err := s.await(ok, thenEnd)
	if err != nil {
		return "", err
	}
	if !accept(ans) {
		return ans, fmt.Errorf("the server answered %s", ans)
	}
	return ans, nil
}

// goAhead accepts rping's "go ahead" (or "done"): a Send on queue 0.
func goAhead(op rdmap.Opcode, h ddp.Header, body []byte) bool {
	return op == rdmap.OpSend && !h.Tagged && h.QN == rdmap.QNSend
}

// rpingResponse is the Read Response to rping's Read Request rr, whole or
// from off to end, with the data rping's client fills in for ping 0.
func rpingResponse(rr rdmap.ReadRequest, off, end int, last bool) []byte {
	data := make([]byte, rr.RDMARDSZ)
	rping.Fill(data, 0)
	return taggedSeg(rdmap.OpReadResponse, rr.SinkSTag, rr.SinkTO+uint64(off), last, data[off:end])
}

// flipBits are the bits sendFlipped flips, octet*8 + bit: the DDP
// Version, the T flag, the RDMAP Version and the top bit of the QN. Over
// MPA any of them fails the CRC; over SCTP each makes a segment that DDP
// or RDMAP must refuse, never a valid one.
var flipBits = []int{0, 7, 15, 6*8 + 7}

var hostileCases = []hostileCase{
	{"abandoned startups", "serve rping perf", abandonStartups},
	{"reconnects", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		n := 0
		for range 10 {
			s, err := tg.sessionOnce(ctx)
			if errors.Is(err, errRefused) {
				continue
			}
			if err != nil {
				return "", fmt.Errorf("reconnect %d: %w", n+1, err)
			}
			s.close()
			n++
		}
		if n == 0 {
			return "", errors.New("every reconnect was rejected")
		}
		return fmt.Sprintf("%d of 10 connected", n), nil
	}},
	{"flipped bits", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		var answers []string
		for _, bit := range flipBits {
			ans, err := tg.misbehave(ctx, func(s *hsess) error {
				s.msn[rdmap.QNSend]++
				return s.sendFlipped(untaggedSeg(rdmap.OpSend, rdmap.QNSend, s.msn[rdmap.QNSend], 0, true, make([]byte, 16)), bit)
			}, nil, func(ans string) bool {
				if tg.scheme == "tcp" {
					return ans == "Terminate "+term.MPACRCError.Name()
				}
				return terminated(ans)
			})
			if err != nil {
				return "", fmt.Errorf("bit %d: %w", bit, err)
			}
			answers = append(answers, ans)
		}
		return strings.Join(dedup(answers), ", "), nil
	}},
	{"a Read Response nobody asked for", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			stag, to := s.adv.STag, s.adv.TO
			if tg.cmd == "rping" {
				// Its own region, after the Read it asked for was answered.
				if err := s.send(rpingResponse(s.rr, 0, int(s.rr.RDMARDSZ), true)); err != nil {
					return err
				}
				cctx, cancel := context.WithTimeout(ctx, answerWait)
				defer cancel()
				for {
					_, op, h, body, err := s.next(cctx)
					if err != nil {
						return fmt.Errorf("waiting for the go ahead: %w", err)
					}
					if goAhead(op, h, body) {
						break
					}
				}
				stag, to = s.rr.SinkSTag, s.rr.SinkTO
			}
			return s.send(taggedSeg(rdmap.OpReadResponse, stag, to, true, make([]byte, 64)))
		}, nil, terminated)
	}},
	{"an Atomic Response nobody asked for", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			resp := rdmap.AtomicResponse{OrigReqID: 1, OrigValue: 42}
			return s.sendMsg(rdmap.OpAtomicResponse, rdmap.QNAtomicResp, resp.Append(nil))
		}, nil, terminated)
	}},
	{"a segment shorter than its DDP Header", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			return s.send(untaggedSeg(rdmap.OpSend, rdmap.QNSend, s.msn[rdmap.QNSend]+1, 0, true, nil)[:10])
		}, nil, terminated)
	}},
	{"half an FPDU, then gone", "serve rping perf", func(ctx context.Context, tg *target) (string, error) {
		if tg.scheme != "tcp" {
			return "tcp:// only", nil
		}
		s, err := tg.session(ctx)
		if err != nil {
			return "", err
		}
		defer s.close()
		s.msn[rdmap.QNSend]++
		seg := untaggedSeg(rdmap.OpSend, rdmap.QNSend, s.msn[rdmap.QNSend], 0, true, make([]byte, 1000))
		return "abandoned", s.link.(*mpaLink).sendPartial(seg, 500)
	}},
	{"a real Read Response replayed", "serve", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			const sink = 0x00777700
			rr := rdmap.ReadRequest{SinkSTag: sink, RDMARDSZ: 64, SrcSTag: s.adv.STag, SrcTO: s.adv.TO + 1000}
			if err := s.sendMsg(rdmap.OpReadRequest, rdmap.QNReadReq, rr.Append(nil)); err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, answerWait)
			defer cancel()
			seg, op, h, body, err := s.next(cctx)
			if err != nil {
				return fmt.Errorf("waiting for the Read Response: %w", err)
			}
			if op != rdmap.OpReadResponse || h.STag != sink || !bytes.Equal(body, expectedRegion(1 << 20)[1000:1064]) {
				return fmt.Errorf("%v to STag %#x, %d octets, for the Read Request", op, h.STag, len(body))
			}
			return s.send(seg)
		}, nil, terminated)
	}},
	{"as many Read Requests as the IRD, the Responses read late", "serve", func(ctx context.Context, tg *target) (string, error) {
		return readLate(ctx, tg, 0, func(ans string, n int) bool { return ans == fmt.Sprintf("all %d Responses", n) })
	}},
	{"four times the IRD's Read Requests, the Responses read late", "serve", func(ctx context.Context, tg *target) (string, error) {
		// A Request finds no place when the IRD's are all waiting to be
		// answered, which depends on how much the sockets take.
		return readLate(ctx, tg, 3, func(ans string, n int) bool {
			return strings.HasPrefix(ans, "Terminate "+term.DDPNoBuffer.Name()) || strings.HasPrefix(ans, "closed") || ans == fmt.Sprintf("all %d Responses", n)
		})
	}},
	{"a Send twice (over sctp:// the later DDP-SSN first)", "serve", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			s.msn[rdmap.QNSend]++
			seg := untaggedSeg(rdmap.OpSend, rdmap.QNSend, s.msn[rdmap.QNSend], 0, true, bytes.Repeat([]byte{'d'}, 1000))
			return s.sendLaterFirst(seg, seg)
		}, nil, terminated)
	}},
	{"control messages out of turn", "perf", func(ctx context.Context, tg *target) (string, error) {
		// A start before the hello, a second hello, a start for another
		// operation: perf's server ends the connection.
		var answers []string
		for i, msgs := range [][]perf.Ctl{
			{{Type: perf.CtlStart, Op: perf.OpAtomic, Size: 8}},
			{{Type: perf.CtlHello, Op: perf.OpAtomic, Size: 8, N: 1, BufLen: perf.CtlLen}, {Type: perf.CtlHello, Op: perf.OpAtomic, Size: 8, N: 1, BufLen: perf.CtlLen}},
			{{Type: perf.CtlHello, Op: perf.OpAtomic, Size: 8, N: 1, BufLen: perf.CtlLen}, {Type: perf.CtlStart, Op: perf.OpRead, Size: 4096}},
		} {
			l, err := tg.dial(ctx)
			if err != nil {
				return "", err
			}
			s := &hsess{link: l}
			for _, m := range msgs {
				if err == nil {
					err = s.sendMsg(rdmap.OpSend, rdmap.QNSend, m.Append(nil))
				}
			}
			ans := ""
			if err == nil {
				ans, err = s.await(nil, false)
			}
			l.close()
			if err == nil && !terminated(ans) {
				err = fmt.Errorf("the server answered %s", ans)
			}
			if err != nil {
				return "", fmt.Errorf("sequence %d: %w", i+1, err)
			}
			answers = append(answers, ans)
		}
		return strings.Join(dedup(answers), ", "), nil
	}},
	{"a real Atomic Response replayed", "perf", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			req := rdmap.AtomicRequest{Op: rdmap.FetchAdd, ReqID: 7, STag: s.adv.STag, TO: s.adv.TO, AddSwapData: 1}
			if err := s.sendMsg(rdmap.OpAtomicRequest, rdmap.QNReadReq, req.Append(nil)); err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, answerWait)
			defer cancel()
			_, op, h, body, err := s.next(cctx)
			if err != nil {
				return fmt.Errorf("waiting for the Atomic Response: %w", err)
			}
			resp, _, perr := rdmap.ParseAtomicResponse(body)
			if op != rdmap.OpAtomicResponse || h.QN != rdmap.QNAtomicResp || perr != nil || resp.OrigReqID != 7 {
				return fmt.Errorf("%v on queue %d for the Atomic Request", op, h.QN)
			}
			return s.sendMsg(rdmap.OpAtomicResponse, rdmap.QNAtomicResp, body)
		}, nil, terminated)
	}},
	{"a Read Response twice (over sctp:// the later DDP-SSN first)", "rping", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			seg := rpingResponse(s.rr, 0, int(s.rr.RDMARDSZ), true)
			return s.sendLaterFirst(seg, seg)
		}, nil, terminated)
	}},
	{"a Read Response in two segments, the Last first", "rping", func(ctx context.Context, tg *target) (string, error) {
		bad := func(s *hsess) error {
			half := int(s.rr.RDMARDSZ) / 2
			return s.sendLaterFirst(rpingResponse(s.rr, 0, half, false), rpingResponse(s.rr, half, int(s.rr.RDMARDSZ), true))
		}
		if tg.scheme == "sctp" {
			// DDP over SCTP places segments in any order and delivers
			// them in DDP-SSN order: the Read is whole, and rping goes on.
			return tg.misbehave(ctx, bad, goAhead, func(ans string) bool { return ans == "answered: "+rdmap.OpSend.String() })
		}
		// Over MPA the Last segment ends the Response (RDMAP may take it
		// as a whole Read, or refuse a Response shorter than the Read);
		// the segment after it answers no Read Request.
		return tg.misbehaveThen(ctx, bad, goAhead, true, terminated)
	}},
	{"a Read Response late", "rping", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			time.Sleep(1500 * time.Millisecond)
			return s.send(rpingResponse(s.rr, 0, int(s.rr.RDMARDSZ), true))
		}, goAhead, func(ans string) bool { return ans == "answered: "+rdmap.OpSend.String() })
	}},
	{"a Read Response with half the data", "rping", func(ctx context.Context, tg *target) (string, error) {
		return tg.misbehave(ctx, func(s *hsess) error {
			return s.send(rpingResponse(s.rr, 0, int(s.rr.RDMARDSZ)/2, true))
		}, goAhead, func(string) bool { return true })
	}},
	{"a Read Request never answered, the connection closed", "rping", func(ctx context.Context, tg *target) (string, error) {
		s, err := tg.session(ctx)
		if err != nil {
			return "", err
		}
		time.Sleep(500 * time.Millisecond)
		s.close()
		return "abandoned", nil
	}},
	{"a Read Request never answered, the connection held", "rping", func(ctx context.Context, tg *target) (string, error) {
		// rping's server waits for the Read as long as the connection
		// lasts; the other cases and the good client run beside it.
		s, err := tg.session(ctx)
		if err != nil {
			return "", err
		}
		tg.hold(s.link)
		return "held to the round's end", nil
	}},
	{"an Info of another length, or naming more than -S", "rping", func(ctx context.Context, tg *target) (string, error) {
		// rping's server takes only Infos of 16 octets ("Received bogus
		// data") naming at most its buffer, and ends the connection.
		var answers []string
		for _, info := range [][]byte{
			rping.Info{Buf: 0x10000, RKey: 0x00abcd00, Size: rpingHostileSize}.Append(nil)[:15],
			append(rping.Info{Buf: 0x10000, RKey: 0x00abcd00, Size: rpingHostileSize}.Append(nil), 0),
			rping.Info{Buf: 0x10000, RKey: 0x00abcd00, Size: rpingHostileSize + 1}.Append(nil),
		} {
			l, err := tg.dial(ctx)
			if err != nil {
				return "", err
			}
			s := &hsess{link: l}
			err = s.sendMsg(rdmap.OpSend, rdmap.QNSend, info)
			ans := ""
			if err == nil {
				ans, err = s.await(nil, false)
			}
			l.close()
			if err == nil && !terminated(ans) {
				err = fmt.Errorf("the server answered %s", ans)
			}
			if err != nil {
				return "", fmt.Errorf("an Info of %d octets: %w", len(info), err)
			}
			answers = append(answers, ans)
		}
		return strings.Join(dedup(answers), ", "), nil
	}},
	{"a real Read Response with a bit flipped", "rping", func(ctx context.Context, tg *target) (string, error) {
		// The bits: the DDP Version, the RDMAP Version, a bit of the
		// STag and the top bit of the TO.
		var answers []string
		for _, bit := range []int{0, 15, 2*8 + 1, 6*8 + 7} {
			ans, err := tg.misbehave(ctx, func(s *hsess) error {
				return s.sendFlipped(rpingResponse(s.rr, 0, int(s.rr.RDMARDSZ), true), bit)
			}, nil, func(ans string) bool {
				if tg.scheme == "tcp" {
					return ans == "Terminate "+term.MPACRCError.Name()
				}
				return terminated(ans)
			})
			if err != nil {
				return "", fmt.Errorf("bit %d: %w", bit, err)
			}
			answers = append(answers, ans)
		}
		return strings.Join(dedup(answers), ", "), nil
	}},
}

// readLate sends serve its IRD and more RDMA Read Requests of 256 KiB
// each at once and reads nothing for 1 s, so that its send side waits on
// a peer that does not read; then it reads, and says what came: every
// Response with the region's octets, or a Terminate (for Requests beyond
// the IRD) or the connection's end after some of them. accept judges
// the answer for the n Requests sent.
func readLate(ctx context.Context, tg *target, more int, accept func(ans string, n int) bool) (string, error) {
	const size, sink = 256 << 10, 0x00777700
	s, err := tg.session(ctx)
	if err != nil {
		return "", fmt.Errorf("starting: %w", err)
	}
	defer s.close()
	ird := s.peerIRD()
	if ird == 0 {
		return "", errors.New("the server's IRD is 0")
	}
	n := ird * (1 + more)
	ans, err := readLateOn(ctx, s, n, size, sink)
	if err == nil && !accept(ans, n) {
		err = fmt.Errorf("the server answered %s", ans)
	}
	return fmt.Sprintf("IRD %d, %d Requests: %s", ird, n, ans), err
}

func readLateOn(ctx context.Context, s *hsess, n, size int, sink uint32) (string, error) {
	region := expectedRegion(1 << 20)
	for i := range n {
		rr := rdmap.ReadRequest{SinkSTag: sink, SinkTO: uint64(i) << 18, RDMARDSZ: uint32(size), SrcSTag: s.adv.STag, SrcTO: s.adv.TO + uint64(i%4)<<18}
		if err := s.sendMsg(rdmap.OpReadRequest, rdmap.QNReadReq, rr.Append(nil)); err != nil {
			return "", fmt.Errorf("Read Request %d: %w", i, err)
		}
	}
	time.Sleep(time.Second)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done := 0
	for done < n {
		seg, err := s.recv(cctx)
		// How many Responses come before a Terminate or the end depends
		// on the sockets' buffers: the answer does not say.
		if errors.Is(err, errEnded) {
			return "closed before every Response", nil
		}
		if err != nil {
			return "", fmt.Errorf("after %d Responses: %w", done, err)
		}
		if e, ok := asTerminate(seg); ok {
			return fmt.Sprintf("Terminate %s before every Response", e.Name()), nil
		}
		op, h, body, ok := rdmapOp(seg)
		if !ok || op != rdmap.OpReadResponse || h.STag != sink {
			return "", fmt.Errorf("a %v segment among the Responses", op)
		}
		i, off := int(h.TO>>18), int(h.TO&uint64(size-1))
		at := (i%4)<<18 + off
		if i >= n || off+len(body) > size || at+len(body) > len(region) || !bytes.Equal(body, region[at:at+len(body)]) {
			return "", fmt.Errorf("a Read Response at TO %#x of other octets than the region's", h.TO)
		}
		if h.Last {
			done++
		}
	}
	return fmt.Sprintf("all %d Responses", n), nil
}

// abandonStartups opens connections and leaves each in the middle of its
// startup: for tcp:// a TCP connection closed at once, half an MPA
// Request, a whole Request and RTR with the Reply never read; for sctp://
// a DTLS handshake given up after a few milliseconds, and a DDP Stream
// Session Initiate whose association closes before the Accept is read.
func abandonStartups(ctx context.Context, tg *target) (string, error) {
	if tg.scheme == "tcp" {
		req := mpaStartup()
		for _, n := range []int{0, 10, len(req) - 20, len(req)} {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileFrom)}}
			c, err := d.DialContext(ctx, "tcp", tg.addr)
			if err != nil {
				return "", err
			}
			c.Write(req[:n])
			c.Close()
		}
		return "4 abandoned", nil
	}
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		r, err := newHoldRelay(hostileFrom, tg.addr)
		if err != nil {
			return "", err
		}
		dctx, cancel := context.WithTimeout(ctx, d)
		a, err := sctpddp.Dial(dctx, "udp", r.addr(), hostileSCTPConfig())
		cancel()
		if err == nil {
			a.Close()
			time.Sleep(closeGrace)
		}
		r.close()
	}
	l, err := tg.dial(ctx)
	if err != nil {
		return "", err
	}
	sl := l.(*sctpLink)
	st, err := sl.a.OpenStream(3)
	if err == nil {
		_, err = st.WriteSessionControl(ctx, wireInitiate())
	}
	l.close()
	if err != nil {
		return "", err
	}
	return "4 abandoned", nil
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// newTarget starts the command on scheme and returns what the hostile
// peer and the good client need of it.
func newTarget(t *testing.T, cmd, scheme string) *target {
	listen := scheme + "://127.0.0.1:0"
	var sctpArgs []string
	if scheme == "sctp" {
		sctpArgs = []string{"--psk", hostilePSK}
	}
	tg := &target{cmd: cmd, scheme: scheme}
	switch cmd {
	case "serve":
		tg.c = startChild(t, "serve", append([]string{"serve", "--json", "--advertise-send", "--listen", listen}, sctpArgs...)...)
		tg.start = func(ctx context.Context, l link) (*hsess, error) {
			s := &hsess{link: l}
			_, op, _, body, err := s.next(ctx)
			if err != nil {
				return nil, fmt.Errorf("the advertisement: %w", err)
			}
			if op != rdmap.OpSend {
				return nil, fmt.Errorf("%v for the advertisement", op)
			}
			if s.adv, _, err = rdmap.ParseRemoteBuffer(body); err != nil {
				return nil, err
			}
			return s, nil
		}
		tg.good = func(ctx context.Context) (int, error) {
			_, err := goodPeer{url: tg.c.url, from: "127.0.0.1"}.once()
			if err != nil {
				return 0, err
			}
			return 2, nil
		}
	case "rping":
		tg.c = startChild(t, "rping", append(append([]string{"rping", "-s", "-P", "-d", "-S", fmt.Sprint(rpingHostileSize)}, sctpArgs...), listen)...)
		tg.start = func(ctx context.Context, l link) (*hsess, error) {
			s := &hsess{link: l}
			info := rping.Info{Buf: 0x10000, RKey: 0x00abcd00, Size: rpingHostileSize}
			if err := s.sendMsg(rdmap.OpSend, rdmap.QNSend, info.Append(nil)); err != nil {
				return nil, err
			}
			_, op, _, body, err := s.next(ctx)
			if err != nil {
				return nil, fmt.Errorf("the Read Request: %w", err)
			}
			if op != rdmap.OpReadRequest {
				return nil, fmt.Errorf("%v for the Read Request", op)
			}
			if s.rr, _, err = rdmap.ParseReadRequest(body); err != nil {
				return nil, err
			}
			if s.rr.SrcSTag != info.RKey || s.rr.SrcTO != info.Buf || s.rr.RDMARDSZ != info.Size {
				return nil, fmt.Errorf("a Read Request %+v for the source %v", s.rr, info)
			}
			return s, nil
		}
		tg.good = func(ctx context.Context) (int, error) { return goodRping(ctx, tg) }
	case "perf":
		tg.c = startChild(t, "perf", append([]string{"perf", "--listen", listen}, sctpArgs...)...)
		tg.start = func(ctx context.Context, l link) (*hsess, error) {
			s := &hsess{link: l}
			hello := perf.Ctl{Type: perf.CtlHello, Op: perf.OpAtomic, Size: 8, N: 1, BufLen: perf.CtlLen}
			if err := s.sendMsg(rdmap.OpSend, rdmap.QNSend, hello.Append(nil)); err != nil {
				return nil, err
			}
			_, op, _, body, err := s.next(ctx)
			if err != nil {
				return nil, fmt.Errorf("the advert: %w", err)
			}
			m, _, err := perf.ParseCtl(body)
			if op == rdmap.OpSend && err == nil && m.Type == perf.CtlRefuse {
				return nil, fmt.Errorf("%w: perf's refusal code %d", errRefused, m.Code)
			}
			if op != rdmap.OpSend || err != nil || m.Type != perf.CtlAdvert {
				return nil, fmt.Errorf("%v (%v) for the advert", op, m.Type)
			}
			s.adv = rdmap.RemoteBuffer{STag: m.STag, TO: m.TO, Len: m.Size}
			return s, nil
		}
		ops := []string{"write", "read", "send", "atomic"}
		var mu sync.Mutex
		runs := 0
		tg.good = func(ctx context.Context) (int, error) {
			mu.Lock()
			op := ops[runs%len(ops)]
			runs++
			mu.Unlock()
			return goodPerf(ctx, tg.c.url, op)
		}
	}
	tg.addr = strings.TrimPrefix(tg.c.url, scheme+"://")
	return tg
}

// goodRping connects an rping client from 127.0.0.1 and pings ten times
// with rping -V's check; it returns the pings.
func goodRping(ctx context.Context, tg *target) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e, err := rping.NewEndpoint(rdmap.NewDevice(rdmap.DeviceConfig{}), rping.DefaultIRD, rping.DefaultORD)
	if err != nil {
		return 0, err
	}
	c, err := rping.NewClient(e, rping.Config{Size: rpingHostileSize, Count: 10, Validate: true})
	if err != nil {
		return 0, err
	}
	closeConn := func() {}
	if tg.scheme == "tcp" {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
		nc, err := d.DialContext(ctx, "tcp", tg.addr)
		if err != nil {
			return 0, err
		}
		if _, err := mpa.Client(ctx, nc, e.QP, nil); err != nil {
			nc.Close()
			return 0, fmt.Errorf("mpa: %w", err)
		}
	} else {
		conn, err := iwarp.Dial(ctx, tg.c.url, e.QP, &iwarp.Config{SCTP: soakSCTPConfig()})
		if err != nil {
			return 0, err
		}
		closeConn = func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
			conn.Shutdown(cctx)
			ccancel()
		}
	}
	defer closeConn()
	err = c.Run(ctx)
	return c.Pings(), err
}

// goodPerf runs "iwarp perf --connect" for op and checks its result; it
// returns the iterations.
func goodPerf(ctx context.Context, url, op string) (int, error) {
	const iters = 200
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := []string{"perf", "--connect", url, "--op", op, "--iters", fmt.Sprint(iters), "--json"}
	if op != "atomic" {
		args = append(args, "--size", "4096")
	}
	if strings.HasPrefix(url, "sctp://") {
		args = append(args, "--psk", hostilePSK)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, iwarpBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("perf --op %s: %v: %s", op, err, strings.TrimSpace(stderr.String()))
	}
	var r struct {
		Results []struct {
			Iterations int `json:"iterations"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Results) != 1 || r.Results[0].Iterations != iters {
		return 0, fmt.Errorf("perf --op %s: %q", op, stdout.String())
	}
	return iters, nil
}

// goodStats counts the well-behaved client's sessions.
type goodStats struct {
	mu       sync.Mutex
	sessions int
	ok       int
	ops      int
	errs     []string
	last     time.Time     // the last success
	worstGap time.Duration // the longest time without a success
}

func (g *goodStats) add(ops int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sessions++
	now := time.Now()
	if err != nil {
		if len(g.errs) < 5 {
			g.errs = append(g.errs, err.Error())
		}
		return
	}
	g.ok++
	g.ops += ops
	g.worstGap = max(g.worstGap, now.Sub(g.last))
	g.last = now
}

// goodLoop runs the target's good sessions one after the other until ctx
// ends; wait waits for the last.
func goodLoop(ctx context.Context, tg *target, g *goodStats) (wait func()) {
	g.last = time.Now()
	done := make(chan struct{})
	// A session ends early only if the server is gone.
	dead, stop := context.WithCancel(context.Background())
	go func() {
		select {
		case <-tg.c.done:
			stop()
		case <-done:
		}
	}()
	go func() {
		defer close(done)
		defer stop()
		for ctx.Err() == nil {
			n, err := tg.good(dead)
			g.add(n, err)
			if tg.c.exited() {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { <-done }
}

// Memory bounds. What a peer can make a server hold is bounded by its
// documented limits (docs/security.md): serve's connections cost their
// region and receive buffers (2 MiB with the defaults) and over sctp://
// a queue pair of about 1.5 MiB, 16 of them per peer; perf's 1 MiB of
// overhead each and what their hello was granted, 4 per peer; rping's its
// queue pair and a few buffers. The hostile peer holds at most a few
// connections at once, so a server's peak stays within hostileRSSMargin
// of where it started, which covers 16 connections of 4 MiB with room for
// the Go runtime; over a long run the resident memory after the rounds
// must not grow by more than hostileRSSGrowth from the first ones.
const (
	hostileRSSMargin = 128 << 20
	hostileRSSGrowth = 64 << 20
	// hostileGoroutines bounds the goroutines of a server whose clients
	// have all gone (an idle one has about 10; the sctp:// listener keeps
	// readers of recently retired streams for RetiredStreamTimeout).
	hostileGoroutines = 100
	// hostileThreads bounds the OS threads.
	hostileThreads = 100
	// hostileGap bounds the time the good client waits between two
	// successful sessions.
	hostileGap = 20 * time.Second
	// hostileShort is the least time the cases run for.
	hostileShort = 2 * time.Second
	// hostileRound is the least time a round takes.
	hostileRound = 500 * time.Millisecond
)

func runHostile(t *testing.T, cmd, scheme string, hold time.Duration) {
	tg := newTarget(t, cmd, scheme)
	time.Sleep(200 * time.Millisecond)
	tg.c.mu.Lock()
	tg.c.rssStart = tg.c.rssLast
	tg.c.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var good goodStats
	waitGood := goodLoop(ctx, tg, &good)
	// Let the good client connect once before the attacks.
	waitfor.Until(20*time.Second, func() bool {
		good.mu.Lock()
		defer good.mu.Unlock()
		return good.sessions > 0 || tg.c.exited()
	})

	type tally struct {
		runs    int
		answers map[string]int
		fails   []string
	}
	tallies := map[string]*tally{}
	var roundRSS []int64
	crashed := false
	start := time.Now()
	lastReport := start
	t.Cleanup(func() { tg.release() })
	// The short form runs every case at least once and for at least
	// hostileShort, so that the good client works beside several of them.
	for round := 0; round == 0 || time.Since(start) < max(hold, hostileShort); round++ {
		roundStart := time.Now()
		for _, hc := range hostileCases {
			if !strings.Contains(hc.cmds, cmd) {
				continue
			}
			ta := tallies[hc.name]
			if ta == nil {
				ta = &tally{answers: map[string]int{}}
				tallies[hc.name] = ta
			}
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			ans, err := hc.run(cctx, tg)
			ccancel()
			ta.runs++
			if err != nil {
				if len(ta.fails) < 3 {
					ta.fails = append(ta.fails, err.Error())
				}
			} else {
				ta.answers[ans]++
			}
			if tg.c.exited() {
				t.Errorf("%s %s: the server exited during %q (round %d): %v\n%s", cmd, scheme, hc.name, round+1, tg.c.err, tg.c.stderrText())
				crashed = true
				break
			}
		}
		tg.release()
		// A round opens a few dozen connections from one address, each
		// leaving a socket in TIME_WAIT for a minute: pace them so that
		// the ephemeral ports last.
		time.Sleep(hostileRound - time.Since(roundStart))
		tg.c.mu.Lock()
		roundRSS = append(roundRSS, tg.c.rssLast)
		rss := tg.c.rssLast
		tg.c.mu.Unlock()
		if tg.c.exited() {
			break
		}
		if hold > 0 && time.Since(lastReport) > 30*time.Second {
			lastReport = time.Now()
			good.mu.Lock()
			t.Logf("%v: %d rounds; VmRSS %s; the good client: %d of %d sessions", time.Since(start).Round(time.Second), round+1, mib(rss), good.ok, good.sessions)
			good.mu.Unlock()
		}
	}
	tg.release()
	cancel()
	waitGood()
	took := time.Since(start)

	names := make([]string, 0, len(tallies))
	for n := range tallies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ta := tallies[n]
		var as []string
		for a, k := range ta.answers {
			as = append(as, fmt.Sprintf("%d× %s", k, a))
		}
		sort.Strings(as)
		t.Logf("%-50s %d runs: %s", n, ta.runs, strings.Join(as, "; "))
		for _, f := range ta.fails {
			t.Errorf("%s %s: %s: %s", cmd, scheme, n, f)
		}
	}

	good.mu.Lock()
	t.Logf("the good client: %d of %d sessions, %d operations with correct data, longest wait %v; hostile rounds: %d in %v",
		good.ok, good.sessions, good.ops, good.worstGap.Round(time.Millisecond), len(roundRSS), took.Round(time.Millisecond))
	if good.ok == 0 || good.ok != good.sessions {
		t.Errorf("%s %s: the good client succeeded in %d of %d sessions: %q", cmd, scheme, good.ok, good.sessions, good.errs)
	}
	if good.worstGap > hostileGap {
		t.Errorf("%s %s: the good client waited %v between two sessions", cmd, scheme, good.worstGap)
	}
	good.mu.Unlock()

	if crashed || !tg.c.alive() {
		return
	}
	tg.c.mu.Lock()
	startRSS, peak, thr := tg.c.rssStart, tg.c.rssPeak, tg.c.thrPeak
	tg.c.mu.Unlock()
	t.Logf("VmRSS %s at the start, %s at the peak; %d threads at most; after each round: %s", mib(startRSS), mib(peak), thr, rssList(roundRSS))
	if peak > startRSS+hostileRSSMargin {
		t.Errorf("%s %s: VmRSS peaked at %s, from %s (allowed %s more)", cmd, scheme, mib(peak), mib(startRSS), mib(hostileRSSMargin))
	}
	if thr > hostileThreads {
		t.Errorf("%s %s: %d threads", cmd, scheme, thr)
	}
	if len(roundRSS) >= 8 {
		early := roundRSS[len(roundRSS)/4]
		if last := roundRSS[len(roundRSS)-1]; last > early+hostileRSSGrowth {
			t.Errorf("%s %s: VmRSS grew from %s (a quarter in) to %s at the end", cmd, scheme, mib(early), mib(last))
		}
	}
	// The hostile connections are all closed; give the server the time
	// its own timers take to free them (sctp://: the association's linger
	// and dead-peer detection run in seconds), then count.
	time.Sleep(2 * time.Second)
	if n := tg.c.goroutines(); n < 0 {
		t.Errorf("%s %s: no goroutine dump on SIGQUIT", cmd, scheme)
	} else {
		t.Logf("%d goroutines at the end", n)
		if n > hostileGoroutines {
			t.Errorf("%s %s: %d goroutines after every client has gone", cmd, scheme, n)
		}
	}
}

func rssList(r []int64) string {
	if len(r) > 12 {
		r = append(append([]int64{}, r[:6]...), r[len(r)-6:]...)
	}
	var s []string
	for _, v := range r {
		s = append(s, strings.TrimSuffix(mib(v), " MiB"))
	}
	return strings.Join(s, " ") + " MiB"
}

// wireInitiate is an enhanced DDP Stream Session Initiate with IRD and
// ORD 1.
func wireInitiate() wire.SessionControl {
	return wire.SessionControl{Function: wire.FunctionEnhancedInitiate, Enhanced: wire.EnhancedData{IRD: 1, ORD: 1}}
}
