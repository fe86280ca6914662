//go:build !js

package mpa

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/iwarpgo/iwarp/rdmap"
)

// TestTsharkTransport captures, with tshark, a real session of this
// package's connections carrying an RDMAP queue pair — RDMA Write, RDMA
// Read, Send, and the Terminate an invalid STag provokes — and checks
// that Wireshark's dissectors find every FPDU with a good CRC and show the
// fields the queue pairs sent.
func TestTsharkTransport(t *testing.T) {
	tshark := needTshark(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"rev1 crc", Config{Revision: 1}},
		{"rev2 crc", Config{Revision: 2}},
		{"rev1 crc markers", Config{Revision: 1, Markers: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Listen(context.Background(), "tcp4", "127.0.0.1:0", &tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			capt := startCapture(t, tshark, l.Addr().(*net.TCPAddr).Port)

			a, b := newPeer(t, rdmap.QPConfig{}), newPeer(t, rdmap.QPConfig{})
			acc := make(chan *Conn, 1)
			go func() {
				r, err := l.Accept(tctx(t))
				if err != nil {
					acc <- nil
					return
				}
				c, _ := r.Accept(b.QP, []byte("srv"))
				acc <- c
			}()
			cfg := tc.cfg
			cfg.PrivateData = []byte("cli")
			ac, err := Dial(tctx(t), "tcp4", l.Addr().String(), a.QP, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ac.Close()
			<-acc
			clientPort := fmt.Sprint(ac.LocalAddr().(*net.TCPAddr).Port)

			target, _ := b.PD.RegisterMemory(make([]byte, 8192), 0x10000, rdmap.RemoteWrite|rdmap.RemoteRead)
			rbuf := b.Reg(t, 256, rdmap.LocalWrite)
			b.QP.PostRecv(rdmap.RecvWR{ID: 1, SGL: []rdmap.SGE{{MR: rbuf, Length: 256}}})
			src := a.Reg(t, 8192, 0)
			fillp(src.Bytes(), 1)
			sink, _ := a.PD.RegisterMemory(make([]byte, 4096), 0x77000, rdmap.LocalWrite)
			// One operation at a time, so that each FPDU has its own TCP
			// segment (Wireshark's Marker support needs that).
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(a.QP.PostWrite(rdmap.WriteWR{ID: 1, SGL: []rdmap.SGE{{MR: src, Length: 3000}}, RemoteSTag: target.STag(), RemoteTO: 0x10100}))
			waitC(t, a.SCQ)
			must(a.QP.PostRead(rdmap.ReadWR{ID: 2, Local: rdmap.SGE{MR: sink, Offset: 0x10, Length: 2000}, RemoteSTag: target.STag(), RemoteTO: 0x10100}))
			waitC(t, a.SCQ)
			must(a.QP.PostSend(rdmap.SendWR{ID: 3, SGL: []rdmap.SGE{{MR: src, Length: 100}}}))
			waitC(t, a.SCQ)
			waitC(t, b.RCQ)
			must(a.QP.PostWrite(rdmap.WriteWR{ID: 4, SGL: []rdmap.SGE{{MR: src, Length: 16}}, RemoteSTag: 0x00bad000, RemoteTO: 0}))
			waitC(t, a.SCQ)
			<-a.QP.Terminated()
			capt.finish()

			var fp []fpduView
			frames := ""
			for _, v := range tsharkDissect(t, tshark, capt.file) {
				if v.srcPort != clientPort && v.dstPort != clientPort {
					continue
				}
				if v.frame != "" {
					frames += v.frame + " "
					continue
				}
				fp = append(fp, v)
			}
			defer func() {
				if t.Failed() {
					t.Logf("tshark -V:\n%s", tsharkVerbose(tshark, capt.file))
				}
			}()
			if frames != "req rep " {
				t.Fatalf("startup frames %q", frames)
			}
			fromClient := func(v fpduView) bool { return v.srcPort == clientPort }
			type want struct {
				client bool
				op     string
				fields map[string]uint64
			}
			wants := []want{
				{true, "0", map[string]uint64{"iwarp_ddp.stag": uint64(target.STag()), "iwarp_ddp.tagged_offset": 0x10100, "iwarp_mpa.ulpdulength": 14 + 3000}},
				{true, "1", map[string]uint64{"iwarp_ddp.qn": 1, "iwarp_ddp.msn": 1, "iwarp_ddp.mo": 0,
					"iwarp_rdma.sinkstag": uint64(sink.STag()), "iwarp_rdma.sinkto": 0x77010, "iwarp_rdma.rdmardsz": 2000,
					"iwarp_rdma.srcstag": uint64(target.STag()), "iwarp_rdma.srcto": 0x10100}},
				{false, "2", map[string]uint64{"iwarp_ddp.stag": uint64(sink.STag()), "iwarp_ddp.tagged_offset": 0x77010, "iwarp_mpa.ulpdulength": 14 + 2000}},
				{true, "3", map[string]uint64{"iwarp_ddp.qn": 0, "iwarp_ddp.msn": 1, "iwarp_ddp.mo": 0, "iwarp_mpa.ulpdulength": 18 + 100}},
				{true, "0", map[string]uint64{"iwarp_ddp.stag": 0x00bad000}},
				{false, "7", map[string]uint64{"iwarp_ddp.qn": 2, "iwarp_ddp.msn": 1, "iwarp_rdma.term_layer": 1, "iwarp_rdma.term_etype_ddp": 1,
					"iwarp_rdma.term_errcode_ddp_tagged": 0}},
			}
			// The RTR of the peer-to-peer startup comes first (Rev 2).
			if tc.cfg.revision() == 2 {
				wants = append([]want{{true, "0", map[string]uint64{"iwarp_mpa.ulpdulength": 14}}}, wants...)
			}
			if len(fp) != len(wants) {
				t.Fatalf("tshark found %d FPDUs on the connection, want %d", len(fp), len(wants))
			}
			for i, w := range wants {
				v := fp[i]
				if fromClient(v) != w.client || !sameNumber(v.f["iwarp_rdma.opcode"], w.op) {
					t.Fatalf("FPDU %d: from client %v opcode %q, want %v %q", i, fromClient(v), v.f["iwarp_rdma.opcode"], w.client, w.op)
				}
				if crc := v.f["iwarp_mpa.crc_check#"]; !strings.Contains(crc, "Good CRC32") {
					t.Fatalf("FPDU %d: CRC %q", i, crc)
				}
				if tc.cfg.Markers && v.f["iwarp_mpa.marker_fpduptr"] == "" && i > 0 && v.f["iwarp_mpa.ulpdulength"] != "" && len(v.f["iwarp_mpa.ulpdulength"]) > 3 {
					t.Logf("FPDU %d has no Marker", i)
				}
				for k, want := range w.fields {
					if got := v.f[k]; !sameNumber(got, fmt.Sprint(want)) {
						t.Fatalf("FPDU %d: %s = %q, want %#x", i, k, got, want)
					}
				}
			}
			if tc.cfg.Markers {
				n := 0
				for _, v := range fp {
					if v.f["iwarp_mpa.marker_fpduptr"] != "" {
						n++
					}
				}
				if n == 0 {
					t.Fatal("Markers were negotiated but tshark decoded none")
				}
			}
		})
	}
}
