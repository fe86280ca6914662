package endpoint

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/iwarpgo/iwarp/mpa"
	"github.com/iwarpgo/iwarp/sctpddp"
)

// Flags are the transport options of serve, perf and rping, each
// field a flag of Register.
type Flags struct {
	Markers     bool
	NoCRC       bool
	Fingerprint string
	PSK         string
	PSKIdentity string
	InsecureUDP bool
	// InsecureSkipVerify lets an sctp:// client connect to a server it
	// cannot verify (no --fingerprint, no --psk).
	InsecureSkipVerify bool
	CertFile           string
	KeyFile            string
	PCAP               string
	KeyLog             string
	DeadPeer           time.Duration
	// MPA, when set, is the whole MPA configuration (a command with MPA
	// flags of its own: rping); its PrivateData goes with the set-up
	// over either transport.
	MPA *mpa.Config
	// Refused, when set, hears of each connection the transport's
	// listener refuses before the command sees it (its peer or
	// startup limits, a DTLS handshake evicted; mpa.Config.Refused,
	// sctpddp.Config.Refused).
	Refused func(remote net.Addr, why error)
}

// mpaConfig returns a fresh MPA configuration for a connection.
func (f *Flags) mpaConfig() *mpa.Config {
	if f.MPA != nil {
		c := *f.MPA
		return &c
	}
	return &mpa.Config{Markers: f.Markers, NoCRC: f.NoCRC}
}

// Register defines the flags in fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&f.Markers, "markers", false, "tcp://: ask the peer for MPA Markers (RFC 5044 §5)")
	fs.BoolVar(&f.NoCRC, "no-crc", false, "tcp://: ask for no MPA CRC32c (used only if both ends ask)")
	fs.StringVar(&f.Fingerprint, "fingerprint", "", "sctp:// client: the server certificate's SHA-256 fingerprint (AB:CD:...) to pin")
	fs.StringVar(&f.PSK, "psk", "", "sctp://: a pre-shared key (text) given to both ends instead of certificates")
	fs.StringVar(&f.PSKIdentity, "psk-identity", "iwarp", "sctp://: the name of the pre-shared key")
	fs.BoolVar(&f.InsecureSkipVerify, "insecure-skip-verify", false, "sctp:// client: INSECURE: connect to any server, without --fingerprint or --psk (the traffic is encrypted, but the server is unknown)")
	fs.BoolVar(&f.InsecureUDP, "insecure-udp", false, "sctp://: INSECURE: SCTP over plain UDP (RFC 6951) without DTLS, so no authentication and no encryption; for Linux kernel SCTP and usrsctp peers in labs and tests")
	fs.StringVar(&f.CertFile, "cert", "", "sctp:// listener: PEM certificate file (default: a fresh self-signed one)")
	fs.StringVar(&f.KeyFile, "key", "", "sctp:// listener: PEM private key file for --cert")
	fs.StringVar(&f.PCAP, "pcap", "", "record the session(s) as a pcap capture in `FILE`")
	fs.DurationVar(&f.DeadPeer, "dead-peer", 0, "sctp://: end a connection after this long without a word from the peer (0: 30s, the library's default)")
	fs.StringVar(&f.KeyLog, "keylog", "", "sctp://: append the DTLS keys to `FILE` (NSS key log) for Wireshark to decrypt a capture")
}

// Check reports, as a usage error, flags that contradict each other or
// do not apply to u, for a listener if listening.
func (f *Flags) Check(u URL, listening bool) error {
	if f.Fingerprint != "" && f.PSK != "" {
		return Usagef("--fingerprint and --psk are two ways to authenticate the peer: give one")
	}
	if f.InsecureUDP && (u.Scheme == "tcp" || f.Fingerprint != "" || f.PSK != "" || f.CertFile != "" || f.KeyLog != "") {
		return Usagef("--insecure-udp is sctp:// without DTLS: it takes no --fingerprint, --psk, --cert, --key or --keylog")
	}
	if f.InsecureSkipVerify && (listening || u.Scheme == "tcp" || f.Fingerprint != "" || f.PSK != "" || f.InsecureUDP) {
		return Usagef("--insecure-skip-verify is for an sctp:// client that has neither --fingerprint nor --psk")
	}
	if u.Scheme == "sctp" && !listening && f.Fingerprint == "" && f.PSK == "" && !f.InsecureUDP && !f.InsecureSkipVerify {
		return Usagef("an sctp:// client verifies its server: give --fingerprint (the listener prints it) or --psk (the same on both ends); --insecure-skip-verify connects to any server")
	}
	if f.Fingerprint != "" {
		if listening {
			return Usagef("--fingerprint is for the client; the listener prints its own")
		}
		if _, err := sctpddp.ParseFingerprint(f.Fingerprint); err != nil {
			return Usagef("bad --fingerprint: %v", err)
		}
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return Usagef("--cert and --key go together")
	}
	if f.CertFile != "" && !listening {
		return Usagef("--cert and --key are for the listener")
	}
	if u.Scheme == "tcp" && (f.Fingerprint != "" || f.PSK != "" || f.CertFile != "") {
		return Usagef("--fingerprint, --psk, --cert and --key apply to sctp:// endpoints only")
	}
	if u.Scheme == "tcp" && f.KeyLog != "" {
		return Usagef("--keylog applies to sctp:// endpoints only")
	}
	if u.Scheme == "tcp" && f.DeadPeer != 0 {
		return Usagef("--dead-peer applies to sctp:// endpoints only (over tcp:// the kernel's TCP timers decide)")
	}
	if f.DeadPeer < 0 {
		return Usagef("--dead-peer must not be negative")
	}
	if u.Scheme == "sctp" && (f.Markers || f.NoCRC) {
		return Usagef("--markers and --no-crc apply to tcp:// endpoints only")
	}
	return nil
}

// sctpMTU is the SCTP MTU for an association with or on addr: pion's
// usual 1350 on networks, 8000 on loopback (sctpddp.LoopbackMTU), where
// the UDP datagrams need no fragmenting at any size.
func sctpMTU(addr string) uint32 {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return sctpddp.LoopbackMTU
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return sctpddp.LoopbackMTU
	}
	return sctpddp.DefaultMTU
}

// SCTPConfig builds the DTLS/SCTP configuration. It returns whether the
// peer is authenticated and the listener's certificate fingerprint.
func (f *Flags) SCTPConfig(addr string, listening bool, rec *Recorder) (*sctpddp.Config, bool, string, error) {
	cfg := &sctpddp.Config{MTU: sctpMTU(addr), DeadPeerTimeout: f.DeadPeer}
	if rec != nil {
		cfg.Trace = rec.sctpTrace
	}
	if f.InsecureUDP {
		cfg.InsecurePlainUDP = true
		return cfg, false, "", nil
	}
	if f.KeyLog != "" {
		kl, err := os.OpenFile(f.KeyLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, false, "", err
		}
		// Left open for the process's life: every handshake appends.
		cfg.KeyLogWriter = kl
	}
	if f.PSK != "" {
		cfg.PSK, cfg.PSKIdentity = []byte(f.PSK), []byte(f.PSKIdentity)
		return cfg, true, "", nil
	}
	var cert tls.Certificate
	var err error
	if f.CertFile != "" {
		cert, err = tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	} else {
		cert, err = sctpddp.GenerateCertificate()
	}
	if err != nil {
		return nil, false, "", fmt.Errorf("certificate: %v", err)
	}
	cfg.Certificate = &cert
	fp, err := sctpddp.CertificateFingerprint(cert)
	if err != nil {
		return nil, false, "", err
	}
	if f.Fingerprint != "" {
		pin, _ := sctpddp.ParseFingerprint(f.Fingerprint)
		cfg.PeerFingerprints = []sctpddp.Fingerprint{pin}
		return cfg, true, fp.String(), nil
	}
	if listening {
		// The listener authenticates itself only: clients pin its
		// fingerprint, and it accepts any client.
		cfg.AcceptAnyClient = true
		return cfg, false, fp.String(), nil
	}
	// A client with --insecure-skip-verify does not verify the listener:
	// it says so (dial's warning).
	cfg.InsecureSkipPeerVerification = true
	return cfg, false, fp.String(), nil
}

// warnInsecure says loudly, under --insecure-udp, that nothing protects
// the traffic, and reports whether it did.
func (f *Flags) warnInsecure(stderr io.Writer) bool {
	if f.InsecureUDP {
		fmt.Fprintln(stderr, "iwarp: WARNING: INSECURE: --insecure-udp runs SCTP over plain UDP without DTLS: no authentication, no encryption; anyone on the path can read, inject and forge this traffic")
	}
	return f.InsecureUDP
}
