/* A minimal kernel BTF for one BPF object's CO-RE relocations, cached for
 * the boot (btfmin.c):
 *
 *   char path[256];
 *   LIBBPF_OPTS(bpf_object_open_opts, oo,
 *       .btf_custom_path = gb_btfmin_path("probetrap", bytes, len, path, sizeof(path)));
 *   ... open, load; if the load fails with it: gb_btfmin_drop(path) and
 *   load again without it.
 *
 * GEBPF_BTF_CACHE=0 turns it off (libbpf then reads the kernel's BTF). */
#ifndef GB_PROBE_BTFMIN_H
#define GB_PROBE_BTFMIN_H

#include <stddef.h>

/* The cached BTF of the object obj[0..len) (name: a file-name tag) in buf,
 * made now if missing; NULL when there is none to use (not root, no
 * bpftool, turned off). */
const char *gb_btfmin_path(const char *name, const void *obj, size_t len, char *buf,
			   size_t size);

/* Remove a cached BTF a load refused. */
void gb_btfmin_drop(const char *path);

#endif
