package demo

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/iwarpgo/iwarp/web"
)

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".wasm": "application/wasm",
}

// wasmIdentity is iwarp.wasm unpacked, made once for the clients that
// do not accept gzip.
var wasmIdentity struct {
	once sync.Once
	b    []byte
	err  error
}

// serveAsset serves the embedded files. iwarp.wasm is stored gzipped and
// sent as it is to a client that accepts gzip (every browser that runs
// WebAssembly does), unpacked to one that accepts only identity, and
// refused (406) to one that accepts neither: RFC 9110 §12.5.3.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if name == "iwarp.wasm" {
		gz := s.cfg.Assets[web.WasmGzName]
		if gz == nil {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", contentTypes[".wasm"])
		h.Set("Vary", "Accept-Encoding")
		switch NegotiateEncoding(r.Header.Values("Accept-Encoding"), "gzip") {
		case "gzip":
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(gz)))
			_, _ = w.Write(gz)
		case "identity":
			wasmIdentity.once.Do(func() {
				zr, err := gzip.NewReader(bytes.NewReader(gz))
				if err != nil {
					wasmIdentity.err = err
					return
				}
				wasmIdentity.b, wasmIdentity.err = io.ReadAll(zr)
			})
			if wasmIdentity.err != nil {
				http.Error(w, wasmIdentity.err.Error(), http.StatusInternalServerError)
				return
			}
			h.Set("Content-Length", strconv.Itoa(len(wasmIdentity.b)))
			_, _ = w.Write(wasmIdentity.b)
		default:
			h.Del("Content-Type")
			http.Error(w, "iwarp.wasm is available gzip-encoded or unencoded (identity); Accept-Encoding allows neither", http.StatusNotAcceptable)
		}
		return
	}
	b, ok := s.cfg.Assets[name]
	if !ok || name == web.WasmGzName {
		http.NotFound(w, r)
		return
	}
	if ct, ok := contentTypes[path.Ext(name)]; ok {
		h.Set("Content-Type", ct)
	}
	if name == "index.html" {
		// Nothing from elsewhere: scripts, styles, connections and the
		// wasm all come from this server.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
	}
	_, _ = w.Write(b)
}

// NegotiateEncoding chooses the content coding of a response available
// as the given codings and as identity, from a request's Accept-Encoding
// field values (RFC 9110 §12.5.3): "" when none of them is acceptable.
//
//   - No Accept-Encoding field: identity (any coding would be allowed;
//     identity is the safe choice).
//   - An empty field value: identity only.
//   - A coding is acceptable when it is listed with q > 0, or when "*"
//     is (q > 0) and the coding is not listed; q=0 means "not
//     acceptable", whatever else matches.
//   - identity is acceptable unless listed with q=0, or "*;q=0" is
//     given and identity is not listed.
//   - Of the acceptable ones, the highest q wins; on a tie the offered
//     codings, in order, before identity.
func NegotiateEncoding(fields []string, offered ...string) string {
	if len(fields) == 0 {
		return "identity"
	}
	q := map[string]float64{}
	star := -1.0
	for _, f := range fields {
		for _, item := range strings.Split(f, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			v := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
					continue
				}
				x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil || x < 0 || x > 1 {
					x = 0 // a malformed weight: treat the coding as refused
				}
				v = x
			}
			if coding == "x-gzip" {
				coding = "gzip" // RFC 9110 §8.4.1.3
			}
			if coding == "*" {
				star = max(star, v)
				continue
			}
			if old, ok := q[coding]; !ok || v > old {
				q[coding] = v
			}
		}
	}
	weight := func(c string) float64 {
		if v, ok := q[c]; ok {
			return v
		}
		if star >= 0 {
			return star
		}
		if c == "identity" {
			return 0.001 // always acceptable unless refused
		}
		return 0
	}
	best, bestQ := "", 0.0
	for _, c := range append(offered, "identity") {
		if w := weight(c); w > bestQ {
			best, bestQ = c, w
		}
	}
	return best
}
