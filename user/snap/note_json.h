/* The GEBPF JSON note (docs/snapshot-format.md, "The JSON note"). */
#ifndef GB_SNAP_NOTE_JSON_H
#define GB_SNAP_NOTE_JSON_H

#include <stddef.h>

#include "snap/snapshot.h"

/* Note types of the core (writer and reader): the GEBPF note's ("GBE" and
 * 1, ASCII like the kernel's NT_SIGINFO "SIGI" and NT_FILE "FILE"; files
 * before it used 1, NT_PRSTATUS's number, which readers keying on the type
 * alone misread: the reader still accepts it), and the kernel's that older
 * headers lack. */
#define NT_GEBPF_JSON 0x47424501
#define NT_GEBPF_JSON_V1 1
#ifndef NT_SIGINFO
#define NT_SIGINFO 0x53494749
#endif
#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

/* The general registers by name, in the note's order (user_regs_struct
 * offsets), shared with the diff. */
struct gb_snap_regdesc {
	const char *name;
	size_t off;
};
extern const struct gb_snap_regdesc gb_snap__regs[];
extern const size_t gb_snap__nregs;

struct cJSON;
/* The kernel state parts (note_kstate.c): a thread entry's fields added to
 * object o / read from it; the "process" object built / read into pk (0, or
 * -1 on ENOMEM). */
void gb_snap__json_tstate(struct cJSON *o, const struct gb_snap_tstate *ks);
void gb_snap__json_tstate_apply(const struct cJSON *o, struct gb_snap_tstate *ks);
struct cJSON *gb_snap__json_pstate(const struct gb_snap_pstate *pk);
int gb_snap__json_pstate_apply(const struct cJSON *o, struct gb_snap_pstate *pk);

/* The note's text for s (compact, fixed key order, no trailing NUL counted);
 * uses each map's core_off and sha256.  malloc'd, NULL on ENOMEM. */
char *gb_snap__json_build(const struct gb_snapshot *s, size_t *len);
/* Fill s from a note: meta, exe, thread tids, map perms/paths, stack traces,
 * fds, vars.  Maps and threads must already exist (from the core's program
 * headers and notes).  0, or -EINVAL / -ENOMEM with one "gebpf: [WHAT: ]PATH:
 * JSON note: <why>" line (path: the core the note is in; what: as
 * gb_snapshot_load's). */
int gb_snap__json_apply(struct gb_snapshot *s, const char *json, size_t len, const char *what,
			const char *path);

#endif
