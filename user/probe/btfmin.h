/* A minimal kernel BTF for one BPF object's CO-RE relocations, cached for
 * the boot (btfmin.c):
 *
 *   static int open_load(void *ctx, const char *cut)
 *   {       ... open with bpf_object_open_opts.btf_custom_path = cut, load;
 *           say why it failed only when cut is NULL ... }
 *   err = gb_btfmin_load("probetrap", bytes, len, open_load, ctx, &used);
 *
 * GEBPF_BTF_CACHE=0 turns it off (libbpf then reads the kernel's BTF). */
#ifndef GB_PROBE_BTFMIN_H
#define GB_PROBE_BTFMIN_H

#include <stdbool.h>
#include <stddef.h>

/* The cached BTF of the object obj[0..len) (name: a file-name tag) in buf,
 * made now if missing; NULL when there is none to use (not root, no
 * bpftool, turned off). */
const char *gb_btfmin_path(const char *name, const void *obj, size_t len, char *buf,
			   size_t size);

/* Open and load an object the way load does, with the cut made for
 * obj[0..len) when there is one: load(ctx, cut) returns 0, or non-0
 * having said why only if cut is NULL; a failure with the cut removes the
 * cut and loads again with NULL.  0, or load's failure; *used: loaded
 * with the cut. */
typedef int (*gb_btfmin_load_fn)(void *ctx, const char *cut);
int gb_btfmin_load(const char *name, const void *obj, size_t len, gb_btfmin_load_fn load,
		   void *ctx, bool *used);

#endif
