/*
 * sctp_peer: the SCTP peer of package sctp's interop tests, over UDP
 * encapsulation (RFC 6951). Built with -DPEER_USRSCTP it uses usrsctp's
 * API (usrsctp_init with a UDP encapsulation port, usrsctp_socket,
 * usrsctp_sendv, usrsctp_recvv); built without, the Linux kernel's SCTP
 * sockets (the kernel's net.sctp.udp_port and net.sctp.encap_port then
 * give the UDP ports).
 *
 * One one-to-one (SOCK_STREAM) association, as client (-c ADDR:PORT) or
 * server (-s, accepting one association), with RTO.Min -t ms (RTO.Initial
 * four times that) and HEARTBEATs every -h ms if given. It sets the Adaptation Layer
 * Indication (RFC 5061 §4.2.6) to -a's code point (1 is DDP's, RFC 5043
 * §11.1; -a none sets none), prints the peer's indication when the
 * SCTP_ADAPTATION_INDICATION notification comes, and answers every user
 * message on the stream it came on, until the peer shuts down:
 *
 *   - PPID 17 (DDP Stream Session Control, RFC 5043 §5.2.3): a DDP Stream
 *     Session Initiate is answered with a DDP Stream Session Accept whose
 *     Private Data is the Initiate's, a Terminate with a Terminate. The
 *     stream's DDP-SSN starts at 0 with the Accept (RFC 5043 §6.1).
 *   - PPID 16 (DDP Segment Chunk, §5.2.2): the DDP Segment is sent back in
 *     a DDP Segment Chunk of this side's next DDP-SSN.
 *   - PPID 0x0a0b0000: the association is aborted, with the message as
 *     the User-Initiated Abort's reason (RFC 9260 §3.3.10.12); "aborted".
 *   - any other PPID: the message is echoed, same PPID and U bit.
 *
 * Every DDP message is sent unordered (RFC 5043 §5.2.1). The output is
 * one line per event, for the test to read: "listening", "established",
 * "adaptation N", "aborted", "done messages=N accepts=N terminates=N".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef PEER_USRSCTP
#include <usrsctp.h>
typedef struct socket *peer_sock;
#define PEER_UNORDERED SCTP_UNORDERED
#define peer_setsockopt usrsctp_setsockopt
#define peer_bind usrsctp_bind
#define peer_listen usrsctp_listen
#define peer_accept usrsctp_accept
#define peer_connect usrsctp_connect
#define peer_close usrsctp_close
#else
#include <linux/sctp.h>
typedef int peer_sock;
#define PEER_UNORDERED SCTP_UNORDERED
#define peer_setsockopt setsockopt
#define peer_bind bind
#define peer_listen listen
#define peer_accept accept
#define peer_connect connect
#define peer_close close
#endif

#define MAX_MESSAGE (256 * 1024)
/* A message of this PPID asks the peer to ABORT, with the message as the
 * reason. */
#define ABORT_PPID 0x0a0b0000u
#define MAX_STREAMS 64

static void die(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sctp_peer: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void say(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

static peer_sock new_socket(void) {
#ifdef PEER_USRSCTP
	peer_sock s = usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
	if (s == NULL)
		die("usrsctp_socket: %s", strerror(errno));
#else
	peer_sock s = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	if (s < 0)
		die("socket: %s", strerror(errno));
#endif
	return s;
}

/* recv_msg reads one whole user message or notification. It returns its
 * length, 0 when the peer has shut down. */
static ssize_t recv_msg(peer_sock s, uint8_t *buf, size_t cap, uint16_t *sid, uint32_t *ppid, int *unordered,
                        int *notification) {
	size_t got = 0;
	for (;;) {
		struct sctp_rcvinfo rcv;
		int flags = 0;
		ssize_t n;
		memset(&rcv, 0, sizeof rcv);
#ifdef PEER_USRSCTP
		socklen_t infolen = sizeof rcv;
		unsigned int infotype = 0;
		struct sockaddr_in from;
		socklen_t fromlen = sizeof from;
		n = usrsctp_recvv(s, buf + got, cap - got, (struct sockaddr *)&from, &fromlen, &rcv, &infolen, &infotype,
		                  &flags);
#else
		char cbuf[CMSG_SPACE(sizeof(struct sctp_rcvinfo))];
		struct iovec iov = {buf + got, cap - got};
		struct msghdr mh;
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof cbuf;
		n = recvmsg(s, &mh, 0);
		flags = mh.msg_flags;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c != NULL; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == IPPROTO_SCTP && c->cmsg_type == SCTP_RCVINFO)
				memcpy(&rcv, CMSG_DATA(c), sizeof rcv);
		}
#endif
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recv: %s", strerror(errno));
		}
		if (n == 0)
			return 0;
		got += (size_t)n;
		if (!(flags & MSG_EOR)) {
			if (got == cap)
				die("message longer than %d octets", MAX_MESSAGE);
			continue;
		}
		*notification = (flags & MSG_NOTIFICATION) != 0;
		*sid = rcv.rcv_sid;
		*ppid = ntohl(rcv.rcv_ppid);
		*unordered = (rcv.rcv_flags & PEER_UNORDERED) != 0;
		return (ssize_t)got;
	}
}

/* send_msg sends a user message, or with abort an ABORT whose
 * User-Initiated Abort cause carries buf as its reason. */
static void send_msg(peer_sock s, const uint8_t *buf, size_t len, uint16_t sid, uint32_t ppid, int unordered,
                     int abort) {
	struct sctp_sndinfo snd;
	memset(&snd, 0, sizeof snd);
	snd.snd_sid = sid;
	snd.snd_ppid = htonl(ppid);
	snd.snd_flags = (unordered ? PEER_UNORDERED : 0) | (abort ? SCTP_ABORT : 0);
	for (;;) {
		ssize_t n;
#ifdef PEER_USRSCTP
		n = usrsctp_sendv(s, buf, len, NULL, 0, &snd, sizeof snd, SCTP_SENDV_SNDINFO, 0);
#else
		char cbuf[CMSG_SPACE(sizeof snd)];
		struct iovec iov = {(void *)buf, len};
		struct msghdr mh;
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof cbuf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = IPPROTO_SCTP;
		c->cmsg_type = SCTP_SNDINFO;
		c->cmsg_len = CMSG_LEN(sizeof snd);
		memcpy(CMSG_DATA(c), &snd, sizeof snd);
		n = sendmsg(s, &mh, 0);
#endif
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (!abort && (size_t)n != len))
			die("send %zu octets on stream %u: %s", len, sid, strerror(errno));
		return;
	}
}

static void setopt(peer_sock s, int opt, const void *v, socklen_t len, const char *name) {
	if (peer_setsockopt(s, IPPROTO_SCTP, opt, v, len) < 0)
		die("setsockopt %s: %s", name, strerror(errno));
}

static void configure(peer_sock s, long adaptation, int remote_udp, int rto_min, int hb_interval) {
	int on = 1;
	setopt(s, SCTP_RECVRCVINFO, &on, sizeof on, "SCTP_RECVRCVINFO");
	setopt(s, SCTP_NODELAY, &on, sizeof on, "SCTP_NODELAY");
	struct sctp_event ev;
	memset(&ev, 0, sizeof ev);
	ev.se_assoc_id = SCTP_FUTURE_ASSOC;
	ev.se_type = SCTP_ADAPTATION_INDICATION;
	ev.se_on = 1;
	setopt(s, SCTP_EVENT, &ev, sizeof ev, "SCTP_EVENT");
	if (adaptation >= 0) {
		struct sctp_setadaptation ad = {(uint32_t)adaptation};
		setopt(s, SCTP_ADAPTATION_LAYER, &ad, sizeof ad, "SCTP_ADAPTATION_LAYER");
	}
	if (remote_udp > 0) {
		struct sctp_udpencaps enc;
		memset(&enc, 0, sizeof enc);
		enc.sue_address.ss_family = AF_INET;
		enc.sue_assoc_id = SCTP_FUTURE_ASSOC;
		enc.sue_port = htons((uint16_t)remote_udp);
		setopt(s, SCTP_REMOTE_UDP_ENCAPS_PORT, &enc, sizeof enc, "SCTP_REMOTE_UDP_ENCAPS_PORT");
	}
	if (rto_min > 0) {
		struct sctp_rtoinfo rto;
		memset(&rto, 0, sizeof rto);
		rto.srto_assoc_id = SCTP_FUTURE_ASSOC;
		rto.srto_initial = (uint32_t)(rto_min * 4);
		rto.srto_min = (uint32_t)rto_min;
		rto.srto_max = (uint32_t)(rto_min * 20);
		setopt(s, SCTP_RTOINFO, &rto, sizeof rto, "SCTP_RTOINFO");
	}
	if (hb_interval > 0) {
		struct sctp_paddrparams pp;
		memset(&pp, 0, sizeof pp);
		pp.spp_assoc_id = SCTP_FUTURE_ASSOC;
		pp.spp_flags = SPP_HB_ENABLE;
		pp.spp_hbinterval = (uint32_t)hb_interval;
		setopt(s, SCTP_PEER_ADDR_PARAMS, &pp, sizeof pp, "SCTP_PEER_ADDR_PARAMS");
	}
}

static void usage(void) {
	die("usage: sctp_peer (-c ADDR:PORT | -s) -p SCTP_PORT [-a CODE_POINT|none] [-u LOCAL_UDP] [-r REMOTE_UDP] "
	    "[-t RTO_MIN_MS] [-h HB_INTERVAL_MS]");
}

int main(int argc, char **argv) {
	const char *connect_to = NULL;
	int server = 0, port = 0, local_udp = 0, remote_udp = 0, rto_min = 0, hb_interval = 0, o;
	long adaptation = 1;
	while ((o = getopt(argc, argv, "c:sp:a:u:r:t:h:")) != -1) {
		switch (o) {
		case 'c': connect_to = optarg; break;
		case 's': server = 1; break;
		case 'p': port = atoi(optarg); break;
		case 'a': adaptation = strcmp(optarg, "none") == 0 ? -1 : strtol(optarg, NULL, 0); break;
		case 'u': local_udp = atoi(optarg); break;
		case 'r': remote_udp = atoi(optarg); break;
		case 't': rto_min = atoi(optarg); break;
		case 'h': hb_interval = atoi(optarg); break;
		default: usage();
		}
	}
	if ((connect_to == NULL) == !server || port <= 0)
		usage();
#ifdef PEER_USRSCTP
	if (local_udp <= 0)
		die("usrsctp needs -u, its UDP encapsulation port");
	usrsctp_init((uint16_t)local_udp, NULL, NULL);
	if (rto_min > 0) {
		usrsctp_sysctl_set_sctp_rto_min_default((uint32_t)rto_min);
		usrsctp_sysctl_set_sctp_rto_initial_default((uint32_t)rto_min * 4);
		usrsctp_sysctl_set_sctp_init_rto_max_default((uint32_t)rto_min * 20);
	}
#else
	(void)local_udp;
#endif
	peer_sock s = new_socket(), a;
	configure(s, adaptation, remote_udp, rto_min, hb_interval);
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	if (peer_bind(s, (struct sockaddr *)&sin, sizeof sin) < 0)
		die("bind: %s", strerror(errno));
	if (server) {
		if (peer_listen(s, 1) < 0)
			die("listen: %s", strerror(errno));
		say("listening");
		a = peer_accept(s, NULL, NULL);
#ifdef PEER_USRSCTP
		if (a == NULL)
#else
		if (a < 0)
#endif
			die("accept: %s", strerror(errno));
	} else {
		char host[64];
		const char *colon = strrchr(connect_to, ':');
		if (colon == NULL || (size_t)(colon - connect_to) >= sizeof host)
			usage();
		memcpy(host, connect_to, (size_t)(colon - connect_to));
		host[colon - connect_to] = 0;
		struct sockaddr_in to;
		memset(&to, 0, sizeof to);
		to.sin_family = AF_INET;
		to.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, host, &to.sin_addr) != 1)
			usage();
		if (peer_connect(s, (struct sockaddr *)&to, sizeof to) < 0)
			die("connect: %s", strerror(errno));
		a = s;
	}
	say("established");

	static uint8_t buf[MAX_MESSAGE], out[MAX_MESSAGE + 2];
	uint16_t ssn[MAX_STREAMS] = {0}; /* the next DDP-SSN this side sends, per stream */
	long messages = 0, accepts = 0, terminates = 0;
	for (;;) {
		uint16_t sid;
		uint32_t ppid;
		int unordered, notification;
		ssize_t n = recv_msg(a, buf, sizeof buf, &sid, &ppid, &unordered, &notification);
		if (n == 0)
			break;
		if (notification) {
			const union sctp_notification *sn = (const void *)buf;
			if ((size_t)n >= sizeof(struct sctp_adaptation_event) &&
			    sn->sn_header.sn_type == SCTP_ADAPTATION_INDICATION)
				say("adaptation %u", sn->sn_adaptation_event.sai_adaptation_ind);
			continue;
		}
		messages++;
		if (sid >= MAX_STREAMS)
			die("message on stream %u", sid);
		if (ppid == 17 && n >= 4) {
			uint16_t fc = (uint16_t)(buf[2] << 8 | buf[3]);
			if (fc == 0x0001) { /* Initiate: Accept with its Private Data */
				ssn[sid] = 0;
				out[0] = 0, out[1] = 0, out[2] = 0, out[3] = 0x02;
				memcpy(out + 4, buf + 4, (size_t)n - 4);
				send_msg(a, out, (size_t)n, sid, 17, 1, 0);
				ssn[sid]++;
				accepts++;
			} else if (fc == 0x0004) { /* Terminate: Terminate */
				out[0] = (uint8_t)(ssn[sid] >> 8), out[1] = (uint8_t)ssn[sid], out[2] = 0, out[3] = 0x04;
				send_msg(a, out, 4, sid, 17, 1, 0);
				ssn[sid]++;
				terminates++;
			} else {
				die("session control function code %#x on stream %u", fc, sid);
			}
		} else if (ppid == 16 && n >= 2) {
			out[0] = (uint8_t)(ssn[sid] >> 8), out[1] = (uint8_t)ssn[sid];
			memcpy(out + 2, buf + 2, (size_t)n - 2);
			send_msg(a, out, (size_t)n, sid, 16, 1, 0);
			ssn[sid]++;
		} else if (ppid == ABORT_PPID) {
			send_msg(a, buf, (size_t)n, sid, ppid, 0, 1);
			say("aborted");
			break;
		} else {
			send_msg(a, buf, (size_t)n, sid, ppid, unordered, 0);
		}
	}
	say("done messages=%ld accepts=%ld terminates=%ld", messages, accepts, terminates);
	if (a != s)
		peer_close(a);
	peer_close(s);
#ifdef PEER_USRSCTP
	/* usrsctp_finish fails while the stack still holds the association's
	 * remains; the process exits in any case. */
	for (int i = 0; i < 20 && usrsctp_finish() != 0; i++)
		usleep(100 * 1000);
#endif
	return 0;
}
