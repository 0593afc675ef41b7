/* The plugin's arguments (docs/qemu.md "Plugin arguments"): the knobs of
 * `gebpf trace`, spelled as QEMU passes plugin arguments (NAME=VALUE):
 *
 *   range=START-END | range=SYMBOL | range=MODULE:SYMBOL
 *   start=ADDR  end=ADDR  exec=on|off  max_events=N  out=FILE  values=on|off
 *
 * START, END and ADDR are hex (0x optional), END inclusive; a SYMBOL is
 * resolved in the guest binary (user/qemu/guest.h) when its first block is
 * translated.  max_events as gebpf's --max-events (default 1,000,000, 0 =
 * unlimited).  out=FILE ending in ".zst" is written as zstd frames.
 * values=on (gebpf trace's --values: registers written, values accessed)
 * needs QEMU 9.2's plugin API: only the plugin built for it
 * (gebpf-qemu10.so, -DGB_QEMU_VALUES) takes it; the one built for QEMU
 * 7.2 refuses it in one line.  Parsing only: no file is opened here. */
#ifndef GB_QEMU_KNOBS_H
#define GB_QEMU_KNOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GB_QEMU_DEFAULT_MAX_EVENTS 1000000ull
/* values=on's refusal by the plugin built for QEMU 7.2 (after "values=on: ") */
#define GB_QEMU_VALUES_TOO_OLD \
	"needs QEMU 9.2 or later (its plugin API gives register and memory values); " \
	"this plugin is built for QEMU 7.2: run scripts/qemu10 and use gebpf-qemu10.so " \
	"(gebpf qemu --values; docs/qemu.md)"

struct gb_qknobs {
	bool has_start, has_end;   /* address bounds (inclusive) */
	uint64_t start, end;
	const char *symbol;        /* range=SYMBOL: resolved later (NULL: none) */
	const char *module;        /* range=MODULE:SYMBOL: MODULE (NULL: none) */
	bool exec;                 /* exec lines (default on) */
	uint64_t max_events;       /* lines written at most; 0 = unlimited */
	const char *out;           /* out=FILE (NULL: stdout); borrowed from argv */
	bool values;               /* values=on (GB_QEMU_VALUES builds only) */
};

/* Parse argv (QEMU keeps it alive for the plugin's life).  0, or -1 with
 * the one error line ("ARG: why") in err. */
int gb_qknobs_parse(struct gb_qknobs *k, int argc, char **argv, char *err, size_t len);

/* Does path end in ".zst"? */
bool gb_qknobs_zstd(const char *path);

#endif
