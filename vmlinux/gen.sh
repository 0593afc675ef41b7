#!/usr/bin/env bash
# Regenerate vmlinux/vmlinux.h from the running kernel's BTF (CO-RE: one header
# serves every kernel; libbpf relocates field offsets at load time).
#   vmlinux/gen.sh [BTF_FILE]      default /sys/kernel/btf/vmlinux
set -euo pipefail
cd "$(dirname "$0")"
btf=${1:-/sys/kernel/btf/vmlinux}
bpftool=${BPFTOOL:-$(command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)}
[ -r "$btf" ] || { echo "gebpf: vmlinux/gen.sh: $btf: no kernel BTF to dump" >&2; exit 1; }
"$bpftool" btf dump file "$btf" format c > vmlinux.h.tmp
mv vmlinux.h.tmp vmlinux.h
echo "vmlinux/vmlinux.h: $(wc -l < vmlinux.h) lines from $btf ($(uname -r))" >&2
