//go:build js && wasm

package main

import (
	"encoding/json"
	"runtime/debug"
	"syscall/js"

	"github.com/iwarpgo/iwarp/capture/replay"
)

// The replay API, globalThis.iwarpReplay, for the page's Replay mode
// (replay.js): the decoder of "iwarp dump" (capture) and the
// model the page plays (capture/replay), run on a capture the page
// read from a file; nothing leaves the browser.
//
//	decode(uint8Array, keylog) -> JSON summary (replay.Model.SummaryJSON) | JSON {error};
//	                             keylog, optional: the octets of a --keylog file, for DTLS
//	events(from, n)           -> JSON array of events [from, from+n)
//	snapshot(n, [buffer IDs]) -> JSON array of the buffers' states after events [0, n)
//
// One capture is loaded at a time; decode replaces it.
var loaded *replay.Model

func init() {
	js.Global().Set("iwarpReplay", js.ValueOf(map[string]any{
		"decode":   fn(replayDecode),
		"events":   fn(replayEvents),
		"snapshot": fn(replaySnapshot),
	}))
}

func replayDecode(a []js.Value) any {
	src := a[0]
	if src.Type() != js.TypeObject || src.Get("byteLength").Type() != js.TypeNumber {
		return errorJSON("decode wants the capture's octets as a Uint8Array")
	}
	b := make([]byte, src.Get("byteLength").Int())
	js.CopyBytesToGo(b, src)
	var keylog []byte
	if k := a[1]; k.Type() == js.TypeObject && k.Get("byteLength").Type() == js.TypeNumber {
		keylog = make([]byte, k.Get("byteLength").Int())
		js.CopyBytesToGo(keylog, k)
	}
	loaded = nil
	// Decoding allocates a record a packet and keeps most of them: with
	// the collector run less often it takes about a third less time.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	m, warning, err := replay.DecodeKeyLog(b, keylog)
	if err != nil {
		return errorJSON(err.Error())
	}
	loaded = m
	return string(m.SummaryJSON(warning))
}

func replayEvents(a []js.Value) any {
	if loaded == nil {
		return errorJSON("no capture is loaded")
	}
	return string(loaded.EventsJSON(a[0].Int(), a[1].Int()))
}

func replaySnapshot(a []js.Value) any {
	if loaded == nil {
		return errorJSON("no capture is loaded")
	}
	var ids []int
	if v := a[1]; v.Type() == js.TypeObject {
		for i := 0; i < v.Length(); i++ {
			ids = append(ids, v.Index(i).Int())
		}
	}
	return string(loaded.SnapshotJSON(a[0].Int(), ids))
}

func errorJSON(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
