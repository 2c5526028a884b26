#!/bin/sh
# tests/numa/guest.sh BUILD OUT: the guest that tests/numa/test_numa boots.
#
#   OUT/vmlinuz    Debian's cloud kernel (the linux-image-6.1.0-NN-cloud-amd64
#                  that linux-image-cloud-amd64 depends on), fetched with
#                  `apt-get download` into OUT/deb/ and unpacked with
#                  `dpkg-deb -x`; kept between runs (nothing goes to /boot).
#                  SHEAF_NUMA_KERNEL=PATH takes that kernel image instead.
#   OUT/initrd.gz  busybox-static and its links, sheafd, sheafctl and the
#                  in-guest test program BUILD/tests/numa/numa_guest at their
#                  BUILD paths under /sheaf/, every library `ldd` lists for
#                  them, and tests/numa/init as /init.  Rebuilt each run (the
#                  binaries change; packing takes a second).
#
# Exit 1 with a message naming what is missing (a package, the kernel).
set -eu

build=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"

die() { echo "tests/numa/guest.sh: $*" >&2; exit 1; }

for tool in cpio gzip ldd; do
	command -v $tool >/dev/null 2>&1 || die "no $tool (apt-get install cpio)"
done
busybox=
for b in /bin/busybox /usr/bin/busybox; do
	# busybox-static: the dynamic busybox would need its libraries too.
	if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then busybox=$b; break; fi
done
[ -n "$busybox" ] || die "no static busybox (apt-get install busybox-static)"

# ---- the kernel -------------------------------------------------------------
if [ -n "${SHEAF_NUMA_KERNEL:-}" ]; then
	[ -r "$SHEAF_NUMA_KERNEL" ] || die "SHEAF_NUMA_KERNEL=$SHEAF_NUMA_KERNEL: not readable"
	cp "$SHEAF_NUMA_KERNEL" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
elif [ ! -s "$out/vmlinuz" ]; then
	pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -n 1)
	[ -n "$pkg" ] || die "apt-cache knows no linux-image-cloud-amd64: run apt-get update" \
		"(or set SHEAF_NUMA_KERNEL to a kernel image with CONFIG_NUMA=y)"
	rm -rf "$out/deb" && mkdir -p "$out/deb"
	(cd "$out/deb" && apt-get download "$pkg" >download.log 2>&1) ||
		die "apt-get download $pkg failed: $(tail -n 3 "$out/deb/download.log")"
	dpkg-deb -x "$out"/deb/"$pkg"_*.deb "$out/deb/x" || die "dpkg-deb -x $pkg failed"
	set -- "$out"/deb/x/boot/vmlinuz-*
	[ -f "$1" ] || die "$pkg holds no boot/vmlinuz-*"
	cp "$1" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
	echo "$pkg" > "$out/vmlinuz.package"
	rm -rf "$out/deb/x"
fi

# ---- the initramfs ----------------------------------------------------------
root=$out/root
rm -rf "$root"
mkdir -p "$root/bin" "$root/sbin" "$root/etc" "$root/proc" "$root/sys" "$root/dev" \
	"$root/tmp" "$root/run" "$root/sheaf/systemd"
cp "$busybox" "$root/bin/busybox"
for app in $("$busybox" --list); do
	[ "$app" = busybox ] || ln -sf busybox "$root/bin/$app"
done
ln -sf ../bin/busybox "$root/sbin/poweroff"
echo 'root:x:0:0:root:/:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
# The programs at BUILD's layout under /sheaf/build (util_daemon.c finds
# sheafd and sheafctl from the test program's path).
bins="daemon/sheafd client/sheafctl/sheafctl tests/numa/numa_guest"
for b in $bins; do
	[ -x "$build/$b" ] || die "no $build/$b (make first)"
	mkdir -p "$root/sheaf/build/$(dirname "$b")"
	cp "$build/$b" "$root/sheaf/build/$b"
	ldd "$build/$b" | awk '/=> \//{print $3} /^[ \t]*\//{print $1}'
done | sort -u | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
# deploy_init() looks for the source tree's unit file beside BUILD.
cp "$here/../../systemd/sheafd@.service" "$root/sheaf/systemd/"
cp "$here/init" "$root/init"
chmod 0755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out/initrd.gz.tmp"
mv "$out/initrd.gz.tmp" "$out/initrd.gz"
rm -rf "$root"
echo "guest: $out/vmlinuz ($(cat "$out/vmlinuz.package" 2>/dev/null || echo given))," \
	"$out/initrd.gz ($(du -k "$out/initrd.gz" | cut -f1) KiB)"
