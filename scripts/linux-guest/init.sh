#!/bin/sh
# The iwarpgo Linux guest's init script, installed as /etc/iwarp/init.sh in
# the initramfs (see README.md beside this file). busybox init (/init) runs
# it from /etc/inittab:
#
#   init.sh setup       once at boot: mounts, modules, network, the 9p share
#                       at /host, siw with the parameters in /host/siw.params
#                       and siw0 on eth0; then /host/ready (or /host/failed)
#   init.sh agent       the command agent (respawned): runs every
#                       /host/cmd/ID.sh the host drops there
#   init.sh siw [P...]  reloads siw with module parameters P (rmmod, insmod,
#                       rdma link add siw0 type siw netdev eth0)
#
# The agent's protocol, all in the 9p share: the host writes cmd/ID.sh
# (atomically, by rename); the agent moves it to run/ID.sh, writes
# run/ID.pid (the command's process group, for kill -KILL -PID), runs it
# with stdout and stderr in run/ID.out, and writes the exit status to
# run/ID.rc (by rename, so that a run/ID.rc the host sees is complete).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
kver=$(uname -r)
siwko=/lib/modules/$kver/extra/siw.ko

siw() {
	# Deleting the link removes the device even from a program that holds
	# it (rdma_cm reports DEVICE_REMOVAL); if rmmod fails all the same,
	# this says so.
	rdma link delete siw0 2>/dev/null
	if grep -q '^siw ' /proc/modules; then
		rmmod siw || return 1
	fi
	# shellcheck disable=SC2068 # the parameters are words on purpose
	insmod "$siwko" $@ || return 1
	rdma link add siw0 type siw netdev eth0 || return 1
	# The device registers asynchronously; wait until it shows.
	i=0
	while [ ! -e /sys/class/infiniband/siw0 ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "siw0 did not appear" >&2; return 1; }
		sleep 0.05
	done
}

setup() {
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev 2>/dev/null
	mkdir -p /dev/pts /dev/shm /tmp /run /root /host
	mount -t devpts devpts /dev/pts
	mount -t tmpfs tmpfs /dev/shm
	mount -t tmpfs tmpfs /tmp
	ulimit -l unlimited
	while read -r m; do
		insmod "/lib/modules/$kver/$m" 2>/dev/null || echo "init: insmod $m failed" >/dev/console
	done </etc/iwarp/modules.load
	if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none host /host; then
		echo "init: cannot mount the 9p share" >/dev/console
		poweroff -f
	fi
	ip link set lo up
	ip link set eth0 up
	ip addr add 10.0.2.15/24 dev eth0
	# No default route: the guest reaches 10.0.2.2 (the host's 127.0.0.1)
	# and nothing else.
	params=$(cat /host/siw.params 2>/dev/null)
	# shellcheck disable=SC2086
	if out=$(siw $params 2>&1); then
		{ echo "kernel=$kver"; echo "siw=$params"; } >/host/ready.tmp
		mv /host/ready.tmp /host/ready
	else
		echo "$out" >/host/failed.tmp
		mv /host/failed.tmp /host/failed
		echo "init: siw: $out" >/dev/console
	fi
}

agent() {
	mkdir -p /host/run
	cd /root || exit 1
	while :; do
		for f in /host/cmd/*.sh; do
			[ -f "$f" ] || continue
			id=${f##*/}
			id=${id%.sh}
			mv "$f" "/host/run/$id.sh" || continue
			(
				setsid sh -c 'echo $$ >"$1.pid.tmp"; mv "$1.pid.tmp" "$1.pid"; exec sh "$1.sh"' sh "/host/run/$id" \
					</dev/null >"/host/run/$id.out" 2>&1
				echo $? >"/host/run/$id.rc.tmp"
				mv "/host/run/$id.rc.tmp" "/host/run/$id.rc"
			) &
		done
		sleep 0.03
	done
}

case $1 in
setup) setup ;;
agent) agent ;;
siw)
	shift
	siw "$@"
	;;
*)
	echo "usage: init.sh setup|agent|siw [param=value...]" >&2
	exit 2
	;;
esac
