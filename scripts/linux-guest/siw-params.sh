#!/bin/sh
# siw-params.sh DIR: turns soft-iWARP's compile-time MPA settings into
# module parameters, in a copy of drivers/infiniband/sw/siw (DIR), so that a
# test can reload siw with other settings without rebuilding:
#
#   insmod siw.ko mpa_version=1 mpa_crc_required=1 peer_to_peer=1 rtr_type=2
#
# All are also writable at run time in /sys/module/siw/parameters/ (mode
# 0644): siw reads them when a connection is set up.
#
#   mpa_version              byte, default 2: the MPA revision siw REQUESTS
#                            as initiator (1 or 2; above 2 siw warns and
#                            uses 2). As responder siw follows the Request.
#                            Revision 2 always sets S (RFC 6581).
#   mpa_crc_required         bool, default 0: as initiator, request CRC
#                            (C=1) and refuse a Reply with C=0. As
#                            responder it changes nothing: siw answers
#                            with the Request's C (RFC 5044 would let a
#                            responder that wants CRC set C=1).
#   mpa_crc_strict           bool, default 0: with mpa_crc_required=0,
#                            refuse C=1 (reject a Request with C=1; drop a
#                            connection whose Reply has C=1)
#   peer_to_peer             bool, default 0: as initiator, request the
#                            peer-to-peer model (RFC 6581 flag A) and send
#                            the RTR that the Reply picks
#   rtr_type                 ushort bit mask, default 3: the RTR indications
#                            siw offers as a peer-to-peer initiator:
#                            1 = zero-length RDMA Write (flag C),
#                            2 = zero-length RDMA Read (flag D), 3 = both,
#                            0 = none (siw then sends no RTR). siw cannot
#                            send a zero-length Send RTR (flag B).
#   try_gso                  bool, default 0: offer/accept the GSO hint bit
#   siw_tcp_nagle            bool, default 0: leave Nagle on (0 sets
#                            TCP_NODELAY on every siw socket)
#   relaxed_ird_negotiation  bool, default 1: adjust IRD/ORD instead of
#                            failing when the peer's values do not fit
#
# The script fails if the source no longer has what it edits.
set -eu
d=${1:?usage: siw-params.sh SIW_SOURCE_DIR}
cd "$d"

bools="try_gso mpa_crc_required mpa_crc_strict siw_tcp_nagle peer_to_peer"
for p in $bools; do
	case $p in
	try_gso) desc="offer and accept the MPA GSO hint bit" ;;
	mpa_crc_required) desc="request MPA CRC as initiator" ;;
	mpa_crc_strict) desc="with mpa_crc_required=0, refuse peers that set C" ;;
	siw_tcp_nagle) desc="keep Nagle on (0: TCP_NODELAY)" ;;
	peer_to_peer) desc="request the RFC 6581 peer-to-peer model as initiator" ;;
	esac
	grep -q "^extern const bool $p;" siw.h
	grep -q "^const bool $p;" siw_main.c
	sed -i "s/^extern const bool $p;/extern bool $p;/" siw.h
	sed -i "s/^const bool $p;/bool $p;\nmodule_param($p, bool, 0644);\nMODULE_PARM_DESC($p, \"$desc\");/" siw_main.c
done

grep -q '^u_char mpa_version = MPA_REVISION_2;' siw_main.c
sed -i 's/^u_char mpa_version = MPA_REVISION_2;/&\nmodule_param(mpa_version, byte, 0644);\nMODULE_PARM_DESC(mpa_version, "MPA revision requested as initiator: 1 or 2");/' siw_main.c

# rtr_type was a __be16 mask of MPA_V2_RDMA_{WRITE,READ}_RTR ORed into the
# ORD word of the MPA Request: it becomes a host-order mask 1=Write 2=Read.
grep -q '^static __be16 rtr_type = MPA_V2_RDMA_READ_RTR | MPA_V2_RDMA_WRITE_RTR;' siw_cm.c
grep -q '^			cep->mpa.v2_ctrl.ord |= rtr_type;' siw_cm.c
sed -i 's/^static __be16 rtr_type = MPA_V2_RDMA_READ_RTR | MPA_V2_RDMA_WRITE_RTR;/#include <linux\/moduleparam.h>\nstatic ushort rtr_type = 3;\nmodule_param(rtr_type, ushort, 0644);\nMODULE_PARM_DESC(rtr_type, "peer-to-peer RTR offered as initiator: bit 0 zero-length Write, bit 1 zero-length Read");/' siw_cm.c
sed -i 's/^			cep->mpa.v2_ctrl.ord |= rtr_type;/			cep->mpa.v2_ctrl.ord |= ((rtr_type \& 1) ? MPA_V2_RDMA_WRITE_RTR : 0) | ((rtr_type \& 2) ? MPA_V2_RDMA_READ_RTR : 0);/' siw_cm.c

grep -q '^static const bool relaxed_ird_negotiation = true;' siw_cm.c
sed -i 's/^static const bool relaxed_ird_negotiation = true;/static bool relaxed_ird_negotiation = true;\nmodule_param(relaxed_ird_negotiation, bool, 0644);\nMODULE_PARM_DESC(relaxed_ird_negotiation, "adjust IRD\/ORD instead of failing");/' siw_cm.c

n=$(cat siw_main.c siw_cm.c | grep -c '^module_param(')
if [ "$n" -ne 8 ]; then
	echo "siw-params.sh: expected 8 module parameters, made $n" >&2
	exit 1
fi
