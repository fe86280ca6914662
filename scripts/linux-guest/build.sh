#!/usr/bin/env bash
# Builds the small Linux guest that the interop tests boot with QEMU: a
# Debian kernel, soft-iWARP (siw) built out of tree with its MPA settings as
# module parameters, and a busybox initramfs with rdma-core (rping, ibv_*)
# and perftest. Everything comes from Debian packages; README.md beside this
# file explains the design.
#
#   build.sh           build unless the cache already holds this recipe's
#                      build; print the guest's directory on stdout
#   build.sh --check   exit 0 (and print the directory) if the cache holds
#                      it, 1 if not; builds nothing
#   build.sh --force   build again with the packages Debian has now
#
# The cache is ${IWARP_GUEST_CACHE:-$HOME/.cache/iwarp/linux-guest}, outside
# the repository. A build is keyed by the hash of this directory's scripts
# (the recipe), not by Debian's current versions: a cached guest stays valid
# when Debian moves on (--force takes the new packages). The guest is in
# $cache/guest: bzImage, initrd, stamp (the recipe and every version used)
# and siw-src/ (the patched siw source it was built from).
#
# Needs, on the host: apt-get and dpkg (Debian or a derivative), root or
# sudo to install what is missing (qemu-system-x86, gcc, make, cpio, kmod,
# xz-utils, the kernel headers of the guest's ABI). What only the guest
# needs is never installed on the host: its packages are downloaded to
# $cache/debs and unpacked.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${IWARP_GUEST_CACHE:-$HOME/.cache/iwarp/linux-guest}
out=$cache/guest
recipe=$(cat "$here/build.sh" "$here/siw-params.sh" "$here/init.sh" | sha256sum | cut -c1-16)

mode=build
case ${1:-} in
--check) mode=check ;;
--force) mode=force ;;
"") ;;
*)
	echo "usage: build.sh [--check|--force]" >&2
	exit 2
	;;
esac

log() { echo "linux-guest: $*" >&2; }
die() {
	echo "linux-guest: $*" >&2
	exit 1
}
cached() {
	[ -f "$out/stamp" ] && grep -qx "recipe=$recipe" "$out/stamp" &&
		[ -s "$out/bzImage" ] && [ -s "$out/initrd" ]
}
if [ $mode = check ]; then
	cached && echo "$out" && exit 0
	exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
apt_install() {
	command -v apt-get >/dev/null || die "needs a Debian-like host (apt-get) to install $*"
	[ -z "$sudo" ] || command -v sudo >/dev/null || die "needs root or sudo to install $*"
	log "installing on the host: $*"
	if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >"$cache/apt.log" 2>&1; then
		# Perhaps the package lists are old or absent: once more after an update.
		$sudo apt-get update -qq >/dev/null 2>&1
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >"$cache/apt.log" 2>&1 ||
			die "apt-get install $* failed: $(tail -5 "$cache/apt.log")"
	fi
}

mkdir -p "$cache"
# The guest runs in QEMU: a cached build on a host without it installs it.
if ! command -v qemu-system-x86_64 >/dev/null; then
	exec 9>"$cache/lock"
	flock 9
	command -v qemu-system-x86_64 >/dev/null || apt_install qemu-system-x86
fi
if [ $mode = build ] && cached; then
	echo "$out"
	exit 0
fi

exec 9>"$cache/lock"
flock 9
# Another build may have finished while we waited for the lock.
if [ $mode = build ] && cached; then
	echo "$out"
	exit 0
fi
start=$(date +%s)
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
	die "needs a Debian-like host (apt-get, dpkg-deb)"

log "apt-get update"
$sudo apt-get update -qq >/dev/null || die "apt-get update failed"

need=()
for t in gcc:gcc make:make cpio:cpio depmod:kmod flock:util-linux xz:xz-utils ldconfig:libc-bin; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
((${#need[@]} == 0)) || apt_install "${need[@]}"

# The guest's kernel: the ABI that linux-image-amd64 points at now, and the
# headers and source of the same version.
image=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$image" ] || die "apt-cache finds no linux-image-amd64"
abi=${image#linux-image-}
kver=$(apt-cache show --no-all-versions "$image" | awk '/^Version:/ {print $2; exit}')
series=$(echo "$kver" | cut -d. -f1,2)
srcpkg=linux-source-$series
log "kernel $abi ($kver), siw from $srcpkg"

headers=linux-headers-$abi
if ! dpkg-query -W -f='${Status}' "$headers" 2>/dev/null | grep -q 'install ok installed'; then
	apt_install "$headers"
fi
[ -d "/usr/src/$headers" ] || die "/usr/src/$headers is missing after installing $headers"

debs=$cache/debs
mkdir -p "$debs"
# fetch [-q] PKG[=VERSION]...: downloads what debs/ lacks; prints each
# .deb's path. With -q, names that apt has no package for (virtual ones)
# are left out instead of failing. One apt-cache call for all: each takes
# a second here.
fetch() {
	local lenient=0 p n f recs missing=()
	if [ "$1" = -q ]; then
		lenient=1
		shift
	fi
	# apt-get download names a file PACKAGE_VERSION_ARCH.deb, with the
	# epoch's colon as %3a.
	recs=$(apt-cache show --no-all-versions "$@" 2>/dev/null | awk '
		/^Package:/ {p = $2} /^Version:/ {v = $2} /^Architecture:/ {a = $2}
		/^$/ {if (p != "") {sub(/:/, "%3a", v); print p, p "_" v "_" a ".deb"}; p = ""}
		END {if (p != "") {sub(/:/, "%3a", v); print p, p "_" v "_" a ".deb"}}')
	for p in "$@"; do
		n=${p%%=*}
		f=$(echo "$recs" | awk -v n="$n" '$1 == n {print $2; exit}')
		if [ -z "$f" ]; then
			((lenient)) && continue
			die "no Debian package $p"
		fi
		[ -s "$debs/$f" ] || missing+=("$p")
		echo "$debs/$f"
	done
	if ((${#missing[@]})); then
		(cd "$debs" && apt-get download -q "${missing[@]}" >"$cache/download.log" 2>&1) ||
			die "apt-get download ${missing[*]} failed: $(tail -3 "$cache/download.log")"
	fi
}

work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. siw, out of tree, with its MPA constants turned into parameters.
srcdeb=$(fetch "$srcpkg=$kver" 2>/dev/null) || srcdeb=$(fetch "$srcpkg")
srcver=$(dpkg-deb -f "$srcdeb" Version)
# The pristine siw source is kept per source package (unpacking it takes
# 10 s).
pristine=$cache/src/$(basename "$srcdeb" .deb)
if [ ! -s "$pristine/siw/siw_main.c" ]; then
	log "extracting drivers/infiniband/sw/siw from $srcpkg $srcver"
	tarball=$(dpkg-deb -c "$srcdeb" | awk '{print $6}' | grep -E '^\./usr/src/linux-source-.*\.tar\.xz$' | head -1)
	[ -n "$tarball" ] || die "$srcdeb has no source tarball"
	top=$(basename "$tarball" .tar.xz)
	mkdir -p "$work/src"
	dpkg-deb --fsys-tarfile "$srcdeb" | tar -xO "$tarball" | xz -dc -T2 |
		tar -x -C "$work/src" --wildcards "$top/drivers/infiniband/sw/siw/*"
	rm -rf "$cache/src"
	mkdir -p "$pristine"
	mv "$work/src/$top/drivers/infiniband/sw/siw" "$pristine/siw"
	rm -rf "$work/src"
fi
siw=$work/siw
cp -r "$pristine/siw" "$siw"
sh "$here/siw-params.sh" "$siw" || die "siw-params.sh could not patch this siw source"
log "building siw.ko against $headers"
make -s -C "/usr/src/$headers" M="$siw" CONFIG_RDMA_SIW=m -j"$(nproc)" modules >"$work/siw-build.log" 2>&1 ||
	die "siw build failed: $(tail -20 "$work/siw-build.log")"
[ -s "$siw/siw.ko" ] || die "siw build made no siw.ko"

# 2. The kernel image and its modules.
kroot=$work/kroot
log "extracting $image"
imagedeb=$(fetch "$image")
dpkg-deb -x "$imagedeb" "$kroot"
vmlinuz=$(ls "$kroot"/boot/vmlinuz-"$abi")
moddir=$kroot/lib/modules/$abi
mkdir -p "$moddir/extra"
cp "$siw/siw.ko" "$moddir/extra/siw.ko"
depmod -b "$kroot" "$abi"

# The modules the guest loads, dependencies first: crc32c before siw
# (siw takes the crc32c hash when it loads, and stays without CRC if it
# cannot), the virtio devices, 9p, the RDMA stack. siw itself is loaded by
# init.sh with the parameters of the day.
wanted="crc32c_generic crc32c-intel virtio_pci virtio_net 9pnet_virtio 9p ib_core ib_uverbs iw_cm rdma_cm rdma_ucm libcrc32c siw"
root=$work/root
mkdir -p "$root/etc/iwarp"
: >"$work/modules.load"
for m in $wanted; do
	modprobe -d "$kroot" -S "$abi" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}' >>"$work/modules.load" ||
		die "module $m: $(modprobe -d "$kroot" -S "$abi" --show-depends "$m" 2>&1 | tail -1)"
done
mkdir -p "$root/lib/modules/$abi"
awk '!seen[$0]++' "$work/modules.load" | while read -r path; do
	rel=${path#"$moddir"/}
	mkdir -p "$root/lib/modules/$abi/$(dirname "$rel")"
	case $rel in
	*.ko.xz) xz -dc "$path" >"$root/lib/modules/$abi/${rel%.xz}" && rel=${rel%.xz} ;;
	*.ko.zst) zstd -qdc "$path" >"$root/lib/modules/$abi/${rel%.zst}" && rel=${rel%.zst} ;;
	*) cp "$path" "$root/lib/modules/$abi/$rel" ;;
	esac
	[ "$rel" = extra/siw.ko ] || echo "$rel" >>"$root/etc/iwarp/modules.load"
done
cp "$moddir"/modules.builtin "$moddir"/modules.builtin.modinfo "$moddir"/modules.order "$root/lib/modules/$abi/"
depmod -b "$root" "$abi"

# 3. The user space: busybox, rdma-core's tools and libraries, the siw
# verbs provider, perftest, iproute2's rdma; the shared libraries they
# need, fetched by following the packages' Depends on lib* (and zlib*)
# packages.
userpkgs="busybox-static rdmacm-utils perftest ibverbs-utils ibverbs-providers libibverbs1 librdmacm1 iproute2 libc6"
full=$work/full
mkdir -p "$full"
declare -A seen=()
level=$userpkgs
versions=""
while [ -n "$level" ]; do
	next=""
	# shellcheck disable=SC2086
	list=$(fetch -q $level)
	for deb in $list; do
		pkg=$(dpkg-deb -f "$deb" Package)
		[ -z "${seen[$pkg]:-}" ] || continue
		seen[$pkg]=1
		versions+="$pkg=$(dpkg-deb -f "$deb" Version) "
		dpkg-deb -x "$deb" "$full"
		for dep in $(dpkg-deb -f "$deb" Pre-Depends Depends | sed 's/^[A-Za-z-]*: //' | tr ',' '\n' |
			sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g' | grep -E '^(lib|zlib)' || true); do
			[ -n "${seen[$dep]:-}" ] || next+="$dep "
		done
	done
	level=$(echo "$next" | tr ' ' '\n' | sort -u | grep . | tr '\n' ' ' || true)
done

mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run" "$root/root" "$root/host"
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/lib64" \
	"$root/lib/x86_64-linux-gnu" "$root/usr/lib/x86_64-linux-gnu/libibverbs" "$root/etc/libibverbs.d"
cp "$full/bin/busybox" "$root/bin/busybox"
for a in $("$root/bin/busybox" --list-full); do
	[ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
done
ln -sf bin/busybox "$root/init"
elfs=()
tools=$(fetch rdmacm-utils perftest ibverbs-utils)
for deb in $tools; do
	for f in $(dpkg-deb -c "$deb" | awk '$6 ~ /^\.\/usr\/bin\// && $1 ~ /^-/ {print $6}'); do
		cp "$full/$f" "$root/usr/bin/" && elfs+=("$root/usr/bin/$(basename "$f")")
	done
done
for f in rdma ss; do
	b=$(ls "$full"/{sbin,bin,usr/sbin,usr/bin}/$f 2>/dev/null | head -1 || true)
	[ -n "$b" ] || die "iproute2 has no $f"
	cp "$b" "$root/usr/sbin/$f" && elfs+=("$root/usr/sbin/$f")
done
cp "$full"/etc/libibverbs.d/siw.driver "$root/etc/libibverbs.d/"
prov=$(ls "$full"/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav*.so 2>/dev/null | head -1 || true)
[ -n "$prov" ] || die "ibverbs-providers has no siw provider"
cp "$prov" "$root/usr/lib/x86_64-linux-gnu/libibverbs/" && elfs+=("$root/usr/lib/x86_64-linux-gnu/libibverbs/$(basename "$prov")")
# glibc dlopens libgcc_s for pthread_exit and thread cancellation (rping
# aborts at its end without it).
cp -L "$full/lib/x86_64-linux-gnu/libgcc_s.so.1" "$root/usr/lib/x86_64-linux-gnu/" &&
	elfs+=("$root/usr/lib/x86_64-linux-gnu/libgcc_s.so.1")
ldso=$(readlink -f "$full/lib64/ld-linux-x86-64.so.2")
cp "$ldso" "$root/lib64/ld-linux-x86-64.so.2"

# The shared-library closure of those programs.
declare -A have=()
todo=("${elfs[@]}")
while ((${#todo[@]})); do
	f=${todo[0]}
	todo=("${todo[@]:1}")
	for so in $(readelf -d "$f" 2>/dev/null | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}'); do
		[ -z "${have[$so]:-}" ] || continue
		have[$so]=1
		[ "$so" = ld-linux-x86-64.so.2 ] && continue
		src=""
		for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu; do
			[ -e "$full/$d/$so" ] && src=$full/$d/$so && break
		done
		[ -n "$src" ] || die "no package gave $so (needed by ${f#"$root"/})"
		cp -L "$src" "$root/usr/lib/x86_64-linux-gnu/$so"
		todo+=("$root/usr/lib/x86_64-linux-gnu/$so")
	done
done
echo /usr/lib/x86_64-linux-gnu >"$root/etc/ld.so.conf"
ldconfig -r "$root" 2>/dev/null || true

printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n10.0.2.15 guest\n10.0.2.2 host\n' >"$root/etc/hosts"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
cat >"$root/etc/inittab" <<'EOF'
::sysinit:/bin/sh /etc/iwarp/init.sh setup
::respawn:/bin/sh /etc/iwarp/init.sh agent
EOF
cp "$here/init.sh" "$root/etc/iwarp/init.sh"

# 4. The result, swapped in whole.
new=$work/out
mkdir -p "$new"
cp "$vmlinuz" "$new/bzImage"
# The uncompressed ELF kernel too: QEMU boots it through its PVH entry,
# which skips the decompressor (4-5 s under TCG). Like the kernel's
# scripts/extract-vmlinux: the first compressed stream that is an ELF.
for magic in '\xfd7zXZ\x00:xz -dc' '\x28\xb5\x2f\xfd:zstd -qdc' '\x1f\x8b\x08\x00:gzip -dc'; do
	for off in $(LC_ALL=C grep -obUaP "${magic%%:*}" "$vmlinuz" | cut -d: -f1 | head -5); do
		tail -c +$((off + 1)) "$vmlinuz" | ${magic#*:} >"$new/vmlinux" 2>/dev/null || true
		if [ "$(head -c 4 "$new/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
			break 2
		fi
	done
done
if [ "$(head -c 4 "$new/vmlinux" 2>/dev/null | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
	log "no ELF kernel in $(basename "$vmlinuz"): the guest boots the bzImage (slower)"
	rm -f "$new/vmlinux"
fi
# Uncompressed: the kernel unpacks it faster than a gzip one under TCG.
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$new/initrd"
mkdir -p "$new/siw-src"
cp "$siw"/*.c "$siw"/*.h "$siw"/Makefile "$new/siw-src/"
{
	echo "recipe=$recipe"
	echo "kernel=$abi"
	echo "kernel_version=$kver"
	echo "siw_source=$srcpkg=$srcver"
	echo "packages=$versions"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$new/stamp"
rm -rf "$out.old"
[ ! -e "$out" ] || mv "$out" "$out.old"
mv "$new" "$out"
rm -rf "$out.old"

# Keep only the .debs this build used.
keep=$( (
	echo "$srcdeb"
	fetch "$image" "${!seen[@]}"
) | xargs -n1 basename | sort -u)
for f in "$debs"/*.deb; do
	echo "$keep" | grep -qxF "$(basename "$f")" || rm -f "$f"
done

log "built in $(($(date +%s) - start)) s: $(du -sh "$out/initrd" | cut -f1) initrd, kernel $abi"
echo "$out"
