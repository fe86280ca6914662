#!/usr/bin/env bash
# Runs every test of the project: formatting, vet, the js/wasm build of the
# core and of the browser peer, the core's tests under js/wasm (Node), all tests with the race detector (the
# fuzz targets' seed corpora included), tshark's dissection of our traffic,
# and the browser demo driven in a real Chromium and Firefox.
#
# Tests that need system packages get them here: on a Debian-like machine
# this installs what is missing (as root, or with sudo); elsewhere it stops
# with one line that says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v firefox-esr >/dev/null 2>&1 || need+=(firefox-esr)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
# The C peers of the SCTP interop tests (sctpddp/sctp/testdata/usrsctp):
# usrsctp's, and the kernel's, linked statically for the Linux guest.
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -e /usr/include/stdio.h ] || need+=(libc6-dev)
[ -e /usr/include/usrsctp.h ] || need+=(libusrsctp-dev)
if ((${#need[@]})); then
	if command -v apt-get >/dev/null 2>&1; then
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		echo "installing ${need[*]} (Debian packages) for the tests..."
		$sudo apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "the tests need: ${need[*]} (install them with your package manager, then run this again)" >&2
		exit 1
	fi
fi
if [ ! -d web/e2e/node_modules/playwright-core ] || [ ! -d web/e2e/node_modules/puppeteer-core ]; then
	echo "installing the browser tests' Node modules (playwright-core for Chromium, puppeteer-core for Firefox)..."
	(cd web/e2e && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

echo "== go vet"
go vet ./...
GOOS=js GOARCH=wasm go vet ./ddp/... ./rdmap/... ./mpa/... ./term/... ./trace/... ./sctpddp/... ./wasm/... ./capture/replay/...

echo "== js/wasm builds: the core, and the browser peer (go generate ./web)"
GOOS=js GOARCH=wasm go build ./ddp/... ./rdmap/... ./mpa/... ./term/... ./trace/... ./sctpddp/...
go generate ./web

echo "== the core's tests in js/wasm, under Node (the browser peer's build)"
GOOS=js GOARCH=wasm go test -count=1 -timeout 3m -exec "$(go env GOROOT)/lib/wasm/go_js_wasm_exec" ./ddp/... ./rdmap/... ./term/... ./sctpddp/... ./capture/replay/...

echo "== the Linux guest of the interop tests (scripts/linux-guest; cached, minutes when not)"
# It installs what its build needs (the kernel headers of the guest's ABI).
bash scripts/linux-guest/build.sh >/dev/null

echo "== go test -race"
# The browser demo test measures placements a second between Chromium and
# the Go peer; it runs on its own, not beside other packages' tests on
# the same two cores, so that the rate it checks is the demo's.
go test -race -count=1 -timeout 10m -skip 'TestDemoInBrowser' ./...

echo "== the benchmark module (bench/: sctp:// against quic-go, pion/dtls and pion/sctp), built, vetted and tested"
(cd bench && unformatted=$(gofmt -l .) && [ -z "$unformatted" ] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
	go build ./... && go vet ./... && go test -race -count=1 -timeout 5m ./...)

# Chromium drives the race build's demo, Chromium and Firefox the plain
# build's: the race detector watches the Go peer, which is the same
# whichever browser drives it, and Firefox's run would add about 100 s
# (it takes about 80 s in the plain build on two cores).
echo "== the browser demo with the race detector, in Chromium: 400 placements a second"
go test -race -count=1 -timeout 5m -run 'TestDemoInBrowser/chromium' ./cmd/iwarp

echo "== the browser demo without the race detector, in Chromium and Firefox: 1,000 placements a second"
go test -count=1 -timeout 8m -run 'TestDemoInBrowser' ./cmd/iwarp
