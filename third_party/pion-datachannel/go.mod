module github.com/pion/datachannel

go 1.24.0

require (
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.10.0
)
