package replay

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"net/netip"
	"strings"

	"github.com/iwarpgo/iwarp/capture/pcapfile"
)

// DTLS 1.2 record content types (RFC 6347 §4.1, RFC 5246 §6.2.1).
const (
	dtlsHandshake       = 22
	dtlsApplicationData = 23
	dtlsHeaderLen       = 13
)

// suite is what decryption needs of a cipher suite (RFC 5246 §6.3).
type suite struct {
	name           string
	gcm            bool
	key, mac, iv   int // octets of each key block part
	prf            func() hash.Hash
	macHash        func() hash.Hash
	unsupportedWhy string
}

// suites are the cipher suites of pion/dtls that the decryption knows:
// AES-GCM and AES-CBC with HMAC-SHA256, with certificates or a PSK.
var suites = map[uint16]suite{
	0xc02b: {name: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", gcm: true, key: 16, iv: 4, prf: sha256.New},
	0xc02f: {name: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", gcm: true, key: 16, iv: 4, prf: sha256.New},
	0xc02c: {name: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", gcm: true, key: 32, iv: 4, prf: sha512.New384},
	0xc030: {name: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", gcm: true, key: 32, iv: 4, prf: sha512.New384},
	0x00a8: {name: "TLS_PSK_WITH_AES_128_GCM_SHA256", gcm: true, key: 16, iv: 4, prf: sha256.New},
	0xc037: {name: "TLS_ECDHE_PSK_WITH_AES_128_CBC_SHA256", key: 16, mac: 32, iv: 16, prf: sha256.New, macHash: sha256.New},
	0x00ae: {name: "TLS_PSK_WITH_AES_128_CBC_SHA256", key: 16, mac: 32, iv: 16, prf: sha256.New, macHash: sha256.New},
}

// parseKeyLog reads an NSS key log (the format --keylog writes):
// "CLIENT_RANDOM <client random> <master secret>" lines, in hex.
func parseKeyLog(b []byte) (map[[32]byte][]byte, error) {
	keys := map[[32]byte][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "CLIENT_RANDOM" {
			continue
		}
		cr, err1 := hex.DecodeString(f[1])
		ms, err2 := hex.DecodeString(f[2])
		if err1 != nil || err2 != nil || len(cr) != 32 || len(ms) != 48 {
			continue
		}
		keys[[32]byte(cr)] = ms
	}
	if len(keys) == 0 {
		return nil, errors.New("the key log has no CLIENT_RANDOM line (the NSS key log format that --keylog writes)")
	}
	return keys, nil
}

// prf is TLS 1.2's PRF (RFC 5246 §5): P_hash(secret, label + seed).
func prf(h func() hash.Hash, secret []byte, label string, seed []byte, n int) []byte {
	s := append([]byte(label), seed...)
	mac := hmac.New(h, secret)
	mac.Write(s)
	a := mac.Sum(nil)
	var out []byte
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(s)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(nil)
	}
	return out[:n]
}

// direction is one side's keys.
type direction struct {
	macKey []byte
	aead   cipher.AEAD
	block  cipher.Block
	iv     []byte // the GCM salt
}

// dtlsFlow is what is known of one DTLS association (a UDP flow).
type dtlsFlow struct {
	client                     netip.AddrPort
	clientRandom, serverRandom []byte
	suite                      uint16
	keys                       [2]*direction // from the client, from the server
	failed                     string
}

func (f *dtlsFlow) derive(keys map[[32]byte][]byte) {
	if f.keys[0] != nil || f.failed != "" || f.clientRandom == nil || f.serverRandom == nil {
		return
	}
	s, ok := suites[f.suite]
	if !ok {
		f.failed = fmt.Sprintf("cipher suite %#04x, which this decryption does not know", f.suite)
		return
	}
	ms, ok := keys[[32]byte(f.clientRandom)]
	if !ok {
		f.failed = "the key log has no secret for this association's client random"
		return
	}
	kb := prf(s.prf, ms, "key expansion", append(append([]byte{}, f.serverRandom...), f.clientRandom...), 2*(s.mac+s.key+s.iv))
	mac, key, iv := kb[:2*s.mac], kb[2*s.mac:2*s.mac+2*s.key], kb[2*s.mac+2*s.key:]
	for i := 0; i < 2; i++ {
		block, err := aes.NewCipher(key[i*s.key : (i+1)*s.key])
		if err != nil {
			f.failed = err.Error()
			return
		}
		d := &direction{macKey: mac[i*s.mac : (i+1)*s.mac], block: block, iv: iv[i*s.iv : (i+1)*s.iv]}
		if s.gcm {
			if d.aead, err = cipher.NewGCM(block); err != nil {
				f.failed = err.Error()
				return
			}
		}
		f.keys[i] = d
	}
}

// open decrypts one record (its 13-octet header hdr, its fragment) with
// the suite's keys; RFC 5246 §6.2.3.2 (CBC, MAC then encrypt) and
// §6.2.3.3 with RFC 5288 §3 (GCM).
func (d *direction) open(s suite, hdr, frag []byte) ([]byte, error) {
	aad := func(n int) []byte {
		a := append(append([]byte{}, hdr[3:11]...), hdr[0], hdr[1], hdr[2])
		return binary.BigEndian.AppendUint16(a, uint16(n))
	}
	if s.gcm {
		if len(frag) < 8+16 {
			return nil, errors.New("record too short")
		}
		nonce := append(append([]byte{}, d.iv...), frag[:8]...)
		return d.aead.Open(nil, nonce, frag[8:], aad(len(frag)-8-16))
	}
	bs := d.block.BlockSize()
	if len(frag) < 2*bs || len(frag)%bs != 0 {
		return nil, errors.New("record not a whole number of blocks")
	}
	pt := make([]byte, len(frag)-bs)
	cipher.NewCBCDecrypter(d.block, frag[:bs]).CryptBlocks(pt, frag[bs:])
	pad := int(pt[len(pt)-1])
	if pad+1+s.mac > len(pt) {
		return nil, errors.New("bad padding")
	}
	for _, v := range pt[len(pt)-pad-1:] {
		if int(v) != pad {
			return nil, errors.New("bad padding")
		}
	}
	pt = pt[:len(pt)-pad-1]
	data, tag := pt[:len(pt)-s.mac], pt[len(pt)-s.mac:]
	m := hmac.New(s.macHash, d.macKey)
	m.Write(aad(len(data)))
	m.Write(data)
	if !hmac.Equal(m.Sum(nil), tag) {
		return nil, errors.New("bad MAC")
	}
	return data, nil
}

// DecryptDTLS turns a capture of DDP over SCTP over DTLS 1.2 into one of
// SCTP in the clear: every application_data record it can decrypt with
// the key log becomes a raw IP packet carrying the SCTP packet, with the
// UDP packet's addresses and time. It returns the new capture and how
// many records it decrypted; none, with an error saying why, when it
// could not decrypt any. Each SCTP packet takes its UDP datagram's ports
// (sctpPorts).
func DecryptDTLS(capture, keylog []byte) ([]byte, int, error) {
	keys, err := parseKeyLog(keylog)
	if err != nil {
		return nil, 0, err
	}
	pr, err := pcapfile.NewReader(bytes.NewReader(capture))
	if err != nil {
		return nil, 0, err
	}
	var out bytes.Buffer
	w, err := pcapfile.NewWriter(&out, pcapfile.LinkRaw)
	if err != nil {
		return nil, 0, err
	}
	flows := map[string]*dtlsFlow{}
	n, fails := 0, map[string]int{}
	for {
		p, err := pr.Next()
		if err != nil {
			break
		}
		ip, err := pcapfile.DecodeIP(p.LinkType, p.Data)
		if err != nil || ip.Proto != pcapfile.ProtoUDP || len(ip.Payload) < 8 {
			continue
		}
		src := netip.AddrPortFrom(ip.Src, binary.BigEndian.Uint16(ip.Payload[0:2]))
		dst := netip.AddrPortFrom(ip.Dst, binary.BigEndian.Uint16(ip.Payload[2:4]))
		k := src.String() + " " + dst.String()
		if dst.String() < src.String() {
			k = dst.String() + " " + src.String()
		}
		f := flows[k]
		for b := ip.Payload[8:]; len(b) >= dtlsHeaderLen; {
			hdr := b[:dtlsHeaderLen]
			l := int(binary.BigEndian.Uint16(hdr[11:13]))
			if hdr[1] != 0xfe || dtlsHeaderLen+l > len(b) {
				break
			}
			frag := b[dtlsHeaderLen : dtlsHeaderLen+l]
			b = b[dtlsHeaderLen+l:]
			epoch := binary.BigEndian.Uint16(hdr[3:5])
			switch {
			case hdr[0] == dtlsHandshake && epoch == 0 && len(frag) >= 12+34:
				if f == nil {
					f = &dtlsFlow{}
					flows[k] = f
				}
				body := frag[12:]
				switch frag[0] {
				case 1: // ClientHello
					f.client, f.clientRandom = src, append([]byte{}, body[2:34]...)
				case 2: // ServerHello
					f.serverRandom = append([]byte{}, body[2:34]...)
					if sid := int(body[34]); len(body) >= 37+sid {
						f.suite = binary.BigEndian.Uint16(body[35+sid:])
					}
				}
				f.derive(keys)
			case hdr[0] == dtlsApplicationData && epoch > 0 && f != nil:
				if f.failed != "" || f.keys[0] == nil {
					fails[cmpOr(f.failed, "the capture misses the handshake's ClientHello or ServerHello")]++
					continue
				}
				d := f.keys[1]
				if src == f.client {
					d = f.keys[0]
				}
				pt, err := d.open(suites[f.suite], hdr, frag)
				if err != nil {
					fails[err.Error()]++
					continue
				}
				if len(pt) < 12 {
					fails["a record too short for an SCTP packet"]++
					continue
				}
				sctpPorts(pt, src.Port(), dst.Port())
				pkt := pcapfile.AppendIPHeader(nil, ip.Src, ip.Dst, pcapfile.ProtoSCTP, uint16(n), len(pt))
				if err := w.WritePacket(p.Time, append(pkt, pt...)); err != nil {
					return nil, 0, err
				}
				n++
			}
		}
	}
	if n == 0 {
		why := "no DTLS application data in the capture"
		for k := range fails {
			why = k
		}
		if len(flows) == 0 {
			why = "no DTLS handshake in the capture"
		}
		return nil, 0, fmt.Errorf("no DTLS record could be decrypted with the key log: %s", why)
	}
	return out.Bytes(), n, nil
}

// sctpPorts gives an SCTP packet the UDP flow's ports: over DTLS both
// ends often use the same SCTP port (5000, as WebRTC does), and on one
// host the two ends would then have the same address. The CRC32c is
// computed anew, unless the packet had none (RFC 9653's zero checksum).
func sctpPorts(pkt []byte, src, dst uint16) {
	binary.BigEndian.PutUint16(pkt[0:2], src)
	binary.BigEndian.PutUint16(pkt[2:4], dst)
	if binary.LittleEndian.Uint32(pkt[8:12]) == 0 {
		return
	}
	binary.LittleEndian.PutUint32(pkt[8:12], 0)
	binary.LittleEndian.PutUint32(pkt[8:12], crc32.Checksum(pkt, crc32.MakeTable(crc32.Castagnoli)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
