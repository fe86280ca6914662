package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDumpSiwTerminateCapture decodes a real capture of Linux siw terminating a
// connection (cmd/iwarp/internal/rping's TestRpingInteropTerminateFromSiw recorded it:
// one rping ping from our client to a stock "rping -s", then two Sends for
// rping's one receive buffer) and checks the Terminate's note.
func TestDumpSiwTerminateCapture(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"dump", "--json", "testdata/siw-terminate.pcap"}, &out, &errb); code != 0 {
		t.Fatalf("iwarp dump: status %d: %s", code, errb.String())
	}
	var terms []map[string]any
	for line := range strings.Lines(out.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r["terminate"] != nil {
			terms = append(terms, r)
		}
	}
	if len(terms) != 1 {
		t.Fatalf("%d Terminates in the capture, want 1:\n%s", len(terms), out.String())
	}
	r := terms[0]
	tm := r["terminate"].(map[string]any)
	if r["src"] != "10.0.2.15:7174" || tm["layer"] != 2.0 || tm["etype"] != 1.0 || tm["ecode"] != 2.0 {
		t.Errorf("the Terminate from siw should read LLP/1/0x02 by the RFC: %v", r)
	}
	note := r["note"].(string)
	if !strings.Contains(note, "Linux siw's Terminate header") || !strings.Contains(note, "DDP / Untagged Buffer Error / Invalid Message Sequence Number - no buffer available (layer 1, type 2, code 0x02)") {
		t.Errorf("note: %s", note)
	}
}
