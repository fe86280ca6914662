package replay

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/iwarpgo/iwarp/capture"
	"github.com/iwarpgo/iwarp/capture/pcapfile"
)

// ErrEncrypted says a capture holds no iWARP in the clear but DTLS
// records over UDP, as DDP over SCTP over DTLS is on the wire.
var ErrEncrypted = errors.New("no iWARP in the clear, but DTLS records over UDP: DDP over SCTP over DTLS, encrypted. " + HowToDecrypt)

// HowToDecrypt says how to replay an encrypted DDP/SCTP session.
const HowToDecrypt = `To replay it, give the key log that --keylog wrote beside the capture (drop both files on the page, or: iwarp replay CAPTURE KEYLOG), ` +
	`or record the session with --pcap (iwarp serve, perf and rping write the SCTP packets before DTLS encryption, no key needed).`

// maxDTLSScan bounds the packets looked at for DTLS.
const maxDTLSScan = 10000

// looksLikeDTLS reports whether one of a capture's first UDP datagrams
// starts with a DTLS record header: a content type of RFC 6347 §4.1
// (change_cipher_spec 20 to application_data 23) and version 1.0 or 1.2
// (0xfeff, 0xfefd).
func looksLikeDTLS(b []byte) bool {
	pr, err := pcapfile.NewReader(bytes.NewReader(b))
	if err != nil {
		return false
	}
	for i := 0; i < maxDTLSScan; i++ {
		p, err := pr.Next()
		if err != nil {
			return false
		}
		ip, err := pcapfile.DecodeIP(p.LinkType, p.Data)
		if err != nil || ip.Proto != pcapfile.ProtoUDP || len(ip.Payload) < 8+13 {
			continue
		}
		d := ip.Payload[8:]
		if d[0] >= 20 && d[0] <= 23 && d[1] == 0xfe && (d[2] == 0xfd || d[2] == 0xff) {
			return true
		}
	}
	return false
}

// Decode reads a capture and builds its model. A capture cut short or
// damaged part way still gives the model of what came before, with the
// error as a warning; a file that is no capture, or holds no iWARP
// traffic, gives an error saying so (ErrEncrypted when it holds DTLS).
func Decode(b []byte) (m *Model, warning string, err error) {
	recs, err := capture.DecodePrefix(bytes.NewReader(b))
	if len(recs) == 0 {
		if errors.Is(err, capture.ErrNotIWARP) && looksLikeDTLS(b) {
			return nil, "", ErrEncrypted
		}
		return nil, "", err
	}
	if err != nil {
		warning = fmt.Sprintf("%v: the records before it are shown", err)
	}
	return Build(recs), warning, nil
}

// DecodeKeyLog is Decode for a capture of DDP over SCTP over DTLS 1.2
// with the key log of its sessions (the NSS format --keylog writes): it
// decrypts what it can (DecryptDTLS) and decodes that, saying in the
// warning how many records it decrypted. A capture with iWARP in the
// clear is decoded as it is, the key log unused.
func DecodeKeyLog(b, keylog []byte) (m *Model, warning string, err error) {
	m, warning, err = Decode(b)
	if err == nil || len(keylog) == 0 || !errors.Is(err, ErrEncrypted) && !errors.Is(err, capture.ErrNotIWARP) {
		return m, warning, err
	}
	clear, n, derr := DecryptDTLS(b, keylog)
	if derr != nil {
		return nil, "", derr
	}
	m, warning, err = Decode(clear)
	if err != nil {
		return nil, "", fmt.Errorf("%d DTLS records decrypted with the key log, but: %w", n, err)
	}
	note := fmt.Sprintf("%d DTLS records decrypted with the key log", n)
	if warning != "" {
		note += "; " + warning
	}
	return m, note, nil
}
