module github.com/iwarpgo/iwarp

go 1.26

// pion: dtls/v3 carries sctp://'s DTLS (v3 rather than v2, which has an
// unfixed advisory, CVE-2026-26014); sctp, webrtc/v4 and the rest carry
// the browser demo's data channels, and pion/sctp is sctp://'s optional
// association (sctpddp.Config.PionSCTP) and a partner in the interop
// tests.

require (
	github.com/coder/websocket v1.8.15
	github.com/pion/dtls/v3 v3.1.15
	github.com/pion/ice/v4 v4.4.2
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.12.1
	github.com/pion/transport/v5 v5.1.4
	github.com/pion/webrtc/v4 v4.2.20
	golang.org/x/sys v0.41.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/pion/datachannel v1.6.4 // indirect
	github.com/pion/interceptor v0.1.48 // indirect
	github.com/pion/mdns/v2 v2.2.0 // indirect
	github.com/pion/randutil v0.1.0 // indirect
	github.com/pion/rtcp v1.2.17 // indirect
	github.com/pion/rtp v1.10.5 // indirect
	github.com/pion/sdp/v3 v3.0.19 // indirect
	github.com/pion/srtp/v3 v3.0.13 // indirect
	github.com/pion/stun/v4 v4.0.0 // indirect
	github.com/pion/transport/v4 v4.1.0 // indirect
	github.com/pion/turn/v5 v5.1.0 // indirect
	github.com/wlynxg/anet v0.0.5 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)
