package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBundledCapturesAgreeWithTshark checks the bundled captures, which
// the page replays and TestReplayInBrowser compares with iwarp dump,
// against tshark's own MPA, DDP and RDMAP dissectors (for DDP over SCTP,
// behind the project's Lua dissector of RFC 5043's chunks, which hands
// each DDP Segment to tshark's DDP and RDMAP dissector): every DDP header
// tshark finds (T, L, STag, TO, QN, MSN, MO, the opcode), every MPA CRC
// it checks and every Terminate triple it reads must be one that dump
// prints. tshark misses some FPDUs (those that span TCP segments, or
// carry Markers), so its list is a part of dump's, and at least one
// segment a capture.
func TestBundledCapturesAgreeWithTshark(t *testing.T) {
	ts := tsharkPath(t)
	lua, err := filepath.Abs(filepath.Join("..", "..", "docs", "wireshark", "ddp-sctp.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"siw-terminate.pcap", "rping-tcp.pcap", "perf-send-tcp-markers.pcap", "perf-atomic-tcp.pcap", "rping-sctp.pcap", "perf-write-sctp.pcap", "sends-tcp.pcap", "sessions-sctp.pcap", "windows-tcp.pcap", "reorder-sctp.pcap", "lossy-tcp.pcap", "loss-streams-sctp.pcap"} {
		t.Run(name, func(t *testing.T) {
			sctp := strings.Contains(name, "sctp")
			file := filepath.Join("..", "..", "web", "static", "captures", name)
			dump := map[string]int{}
			for _, r := range dumpJSON(t, file) {
				d, ok := r["ddp"].(map[string]any)
				if !ok {
					continue
				}
				dump[ddpKey(d, r["opcode"])]++
				if !sctp && r["crc"] != "good" {
					t.Errorf("dump: record %v has CRC %v", r["n"], r["crc"])
				}
				if tm, ok := r["terminate"].(map[string]any); ok {
					dump[fmt.Sprintf("term %v/%v/%v", tm["layer"], tm["etype"], tm["ecode"])]++
				}
			}
			args := append([]string{"-n", "-r", file}, tsharkArgs...)
			if sctp {
				args = append(args, "-X", "lua_script:"+lua)
			}
			args = append(args, "-Y", "iwarp_ddp", "-T", "fields", "-E", "separator=;", "-E", "occurrence=a", "-E", "aggregator=,",
				"-e", "iwarp_ddp.tagged_flag", "-e", "iwarp_ddp.last_flag", "-e", "iwarp_ddp.stag", "-e", "iwarp_ddp.tagged_offset",
				"-e", "iwarp_ddp.qn", "-e", "iwarp_ddp.msn", "-e", "iwarp_ddp.mo", "-e", "iwarp_rdma.opcode",
				"-e", "iwarp_mpa.crc", "-e", "iwarp_mpa.crc_check",
				"-e", "iwarp_rdma.term_layer",
				// The Error Type and Code are fields of the Layer they belong to.
				"-e", "iwarp_rdma.term_etype", "-e", "iwarp_rdma.term_etype_rdma", "-e", "iwarp_rdma.term_etype_ddp", "-e", "iwarp_rdma.term_etype_llp",
				"-e", "iwarp_rdma.term_errcode", "-e", "iwarp_rdma.term_errcode_rdma", "-e", "iwarp_rdma.term_errcode_ddp_tagged",
				"-e", "iwarp_rdma.term_errcode_ddp_untagged", "-e", "iwarp_rdma.term_errcode_llp")
			out, err := exec.Command(ts, args...).Output()
			if err != nil {
				t.Fatalf("tshark: %v", err)
			}
			seen := 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Split(line, ";")
				if len(f) != 20 || f[0] == "" {
					continue
				}
				// A frame with one FPDU has one value a field; skip the
				// rare frame with several (their fields interleave).
				if strings.Contains(f[0], ",") {
					continue
				}
				tagged := f[0] == "1" || f[0] == "True"
				d := map[string]any{"tagged": tagged, "last": f[1] == "1" || f[1] == "True"}
				if tagged {
					d["stag"], d["to"] = num(t, f[2]), num(t, f[3])
				} else {
					d["qn"], d["msn"], d["mo"] = num(t, f[4]), num(t, f[5]), num(t, f[6])
				}
				k := ddpKey(d, num(t, f[7]))
				if dump[k] == 0 {
					t.Errorf("tshark finds %s, which dump does not print (dump: %v)", k, dump)
				}
				// tshark shows a good CRC as "CRC check: X (Good CRC32)"
				// alone, and the CRC field beside it when they differ.
				if !sctp && (f[9] == "" || f[8] != "" && f[8] != f[9]) {
					t.Errorf("tshark: %s has CRC %q, computed %q; dump says good", k, f[8], f[9])
				}
				if f[10] != "" {
					tk := fmt.Sprintf("term %d/%d/%d", num(t, f[10]), num(t, first(f[11:15])), num(t, first(f[15:20])))
					if dump[tk] == 0 {
						t.Errorf("tshark reads Terminate %s, dump does not", tk)
					}
				}
				seen++
			}
			if seen == 0 {
				t.Fatalf("tshark found no DDP segment:\n%s", out)
			}
			t.Logf("%d DDP segments as tshark dissects them agree with dump", seen)
		})
	}
}

// ddpKey names a DDP header and opcode the same way from dump's JSON and
// from tshark's fields.
func ddpKey(d map[string]any, opcode any) string {
	n := func(k string) uint64 {
		switch v := d[k].(type) {
		case float64:
			return uint64(v)
		case uint64:
			return v
		}
		return 0
	}
	op := uint64(0)
	switch v := opcode.(type) {
	case float64:
		op = uint64(v)
	case uint64:
		op = v
	}
	if d["tagged"] == true {
		return fmt.Sprintf("T=1 L=%v STag %#x TO %#x op %d", d["last"] == true, n("stag"), n("to"), op)
	}
	return fmt.Sprintf("T=0 L=%v QN %d MSN %d MO %d op %d", d["last"] == true, n("qn"), n("msn"), n("mo"), op)
}

// first returns the first of fields that is not empty.
func first(fields []string) string {
	for _, f := range fields {
		if f != "" {
			return f
		}
	}
	return ""
}

func num(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("tshark field %q: %v", s, err)
	}
	return v
}
