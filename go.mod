module github.com/iwarpgo/iwarp

go 1.26

// pion versions (see /work/shared/NOTES.md): the newest of the pion stack,
// pion/sctp v1.12.1, dtls/v3 v3.1.15 and webrtc/v4 v4.2.26, with the
// pion/transport/v5 they were released against (v5.1.4; the module proxy
// these builds use once refused v5.1.x, and older releases were pinned to
// avoid a replace directive). dtls/v3 rather than v2 because v2 has an
// unfixed advisory (CVE-2026-26014).

require (
	github.com/coder/websocket v1.8.15
	github.com/pion/dtls/v3 v3.1.15
	github.com/pion/ice/v4 v4.4.8
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.12.1
	github.com/pion/webrtc/v4 v4.2.26
	golang.org/x/sys v0.41.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/pion/datachannel v1.6.3 // indirect
	github.com/pion/interceptor v0.1.51 // indirect
	github.com/pion/mdns/v2 v2.2.2 // indirect
	github.com/pion/randutil v0.1.0 // indirect
	github.com/pion/rtcp v1.2.20 // indirect
	github.com/pion/rtp v1.10.6 // indirect
	github.com/pion/sdp/v3 v3.0.20 // indirect
	github.com/pion/srtp/v3 v3.1.3 // indirect
	github.com/pion/stun/v4 v4.0.1 // indirect
	github.com/pion/transport/v5 v5.1.4 // indirect
	github.com/pion/turn/v5 v5.1.3 // indirect
	github.com/wlynxg/anet v0.0.5 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)
