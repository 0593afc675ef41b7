#!/usr/bin/env bash
# Put QEMU's plugin API header, qemu-plugin.h, for the installed qemu-user
# into DIR (default .output/bench/include), for bench/qemu_trace_plugin.c.
# No Debian binary package ships it (checked: qemu-user, qemu-system-common,
# qemu-system-data, qemu-utils, qemu-system-x86/-misc in bookworm, trixie and
# sid), so it comes from Debian's source package of the same version
# (apt-get source, through a private deb-src list: the system's apt
# configuration is not touched).  Exit 0 when DIR/qemu-plugin.h is there.
set -euo pipefail
dir=${1:-.output/bench/include}
[ -f "$dir/qemu-plugin.h" ] && exit 0
ver=$(dpkg-query -W -f='${Version}' qemu-user 2>/dev/null) || {
	echo "qemu-plugin-h: qemu-user is not installed (scripts/deps)" >&2; exit 1; }
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/src"
echo "deb-src http://deb.debian.org/debian $suite main" >"$tmp/sources.list"
echo "deb-src http://deb.debian.org/debian-security $suite-security main" >>"$tmp/sources.list"
apto=(-o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts=-
      -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o APT::Sandbox::User=root)
apt-get "${apto[@]}" -qq update >/dev/null
# the version's binary NMU suffix (+bN) is not part of the source version
src=${ver%+b[0-9]*}
(cd "$tmp/src" && apt-get "${apto[@]}" -qq source --download-only "qemu=$src" >/dev/null)
orig=$(ls "$tmp"/src/qemu_*.orig.tar.* | head -1)
member=$(tar -tf "$orig" | grep '/include/qemu/qemu-plugin.h$' | head -1)
[ -n "$member" ] || { echo "qemu-plugin-h: no qemu-plugin.h in $orig" >&2; exit 1; }
tar -xf "$orig" -C "$tmp" "$member"
mkdir -p "$dir"
cp "$tmp/$member" "$dir/qemu-plugin.h"
echo "qemu-plugin-h: $dir/qemu-plugin.h from Debian's qemu $src source" >&2
