/* --set REG=VALUE and --poke ADDR=HEX on a loaded snapshot, and the
 * load-and-restore step of `gebpf trace --from SNAP`. */
#include "resume/resume.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/parse.h"
#include "snap/note_json.h"

/* "NAME=VALUE": NAME copied into name, VALUE returned (NULL: no '='). */
static const char *split(const char *spec, char *name, size_t len)
{
	const char *eq = strchr(spec, '=');
	if (!eq || eq == spec || (size_t)(eq - spec) >= len)
		return NULL;
	memcpy(name, spec, (size_t)(eq - spec));
	name[eq - spec] = 0;
	return eq + 1;
}

int gb_resume_edit_reg(struct gb_snapshot *s, const char *spec)
{
	char name[32];
	const char *val = split(spec, name, sizeof(name));
	uint64_t v;
	if (!val || gb_parse_u64(val, &v))
		return gb_fail(-EINVAL, "resume: --set %s: expected REG=VALUE (VALUE 0x... or decimal)",
			       spec);
	if (!s->nthreads)
		return gb_fail(-EINVAL, "resume: --set %s: the snapshot has no thread", spec);
	for (size_t i = 0; i < gb_snap__nregs; i++)
		if (!strcmp(gb_snap__regs[i].name, name)) {
			memcpy((char *)&s->threads[0].regs + gb_snap__regs[i].off, &v, sizeof(v));
			return 0;
		}
	return gb_fail(-EINVAL, "resume: --set %s: %s: no such register (rax..r15, rip, eflags, "
		       "fs_base, gs_base, ...)", spec, name);
}

int gb_resume_edit_poke(struct gb_snapshot *s, const char *spec)
{
	char name[32], what[300];
	const char *hex = split(spec, name, sizeof(name));
	uint64_t addr;
	size_t n = hex ? strlen(hex) : 0;
	snprintf(what, sizeof(what), "resume: --poke %s", spec);
	if (!hex || gb_parse_hex(name, &addr) || !n || n % 2)
		return gb_fail(-EINVAL, "%s: expected ADDR=HEXBYTES (an even number of hex digits)",
			       what);
	uint8_t *buf = malloc(n / 2);
	if (!buf)
		return gb_fail(-ENOMEM, "%s: out of memory", what);
	for (size_t i = 0; i < n / 2; i++) {
		char byte[3] = { hex[2 * i], hex[2 * i + 1], 0 }, *end;
		buf[i] = (uint8_t)strtoul(byte, &end, 16);
		if (*end) {
			free(buf);
			return gb_fail(-EINVAL, "%s: '%s': not hex digits", what, hex);
		}
	}
	int r = gb_snapshot_write_memory(s, addr, buf, n / 2, what);
	free(buf);
	return r;
}

int gb_resume_start(const char *path, struct gb_tracee *t, uint64_t *vt)
{
	char what[4200];
	struct gb_snapshot *s = NULL;
	snprintf(what, sizeof(what), "--from %s", path);
	int r = gb_snapshot_load(path, &s, "--from");
	if (!r)
		r = gb_resume_restore(s, t, what, NULL);
	if (!r && s->meta.vt < 0)
		gb_warn("--from %s: the snapshot does not say how many in-range instructions ran before "
			"it (point %s): vt starts at 0", path, s->meta.point ? s->meta.point : "unknown");
	if (!r)
		*vt = s->meta.vt > 0 ? (uint64_t)s->meta.vt : 0;
	gb_snapshot_free(s);
	return r ? -1 : 0;
}
