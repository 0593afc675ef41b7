/* The kernel state parts of the JSON note (docs/snapshot-format.md, "The
 * JSON note": the thread entries' kernel fields and "process").  Each part
 * is written only when it was captured, and read back when present: a
 * snapshot without them (older gebpf, seccomp) loads with their bits clear. */
#include "snap/note_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static cJSON *hex(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	return cJSON_CreateString(b);
}

static bool get_hex(const cJSON *j, uint64_t *out)
{
	const char *s = cJSON_GetStringValue(j);
	char *end;
	if (!s || strncmp(s, "0x", 2))
		return false;
	*out = strtoull(s + 2, &end, 16);
	return !*end && end != s + 2;
}

static bool get_num(const cJSON *j, double *out)
{
	if (!cJSON_IsNumber(j))
		return false;
	*out = j->valuedouble;
	return true;
}

static const cJSON *item(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* "pending": {"siginfo": [128 bytes as hex, ...], "lost": N} */
static void add_pending(cJSON *o, const struct gb_snap_pending *p)
{
	cJSON *r = cJSON_AddObjectToObject(o, "pending");
	cJSON *a = cJSON_AddArrayToObject(r, "siginfo");
	for (uint32_t i = 0; i < p->n && i < GB_SNAP_NPEND; i++) {
		char h[2 * 128 + 1];
		for (int j = 0; j < 128; j++)
			snprintf(h + 2 * j, 3, "%02x", p->info[i][j]);
		cJSON_AddItemToArray(a, cJSON_CreateString(h));
	}
	cJSON_AddNumberToObject(r, "lost", p->lost);
}

static bool get_pending(const cJSON *r, struct gb_snap_pending *p)
{
	const cJSON *a = item(r, "siginfo"), *e;
	double lost;
	memset(p, 0, sizeof(*p));
	if (!cJSON_IsArray(a) || !get_num(item(r, "lost"), &lost))
		return false;
	p->lost = (uint32_t)lost;
	cJSON_ArrayForEach(e, a) {
		const char *h = cJSON_GetStringValue(e);
		if (!h || strlen(h) != 256)
			return false;
		if (p->n == GB_SNAP_NPEND) {
			p->lost++;
			continue;
		}
		for (int j = 0; j < 128; j++) {
			char b[3] = { h[2 * j], h[2 * j + 1], 0 }, *end;
			p->info[p->n][j] = (uint8_t)strtoul(b, &end, 16);
			if (*end)
				return false;
		}
		p->n++;
	}
	return true;
}

void gb_snap__json_tstate(cJSON *o, const struct gb_snap_tstate *ks)
{
	if (ks->have & GB_TS_NAME)
		cJSON_AddStringToObject(o, "name", ks->name);
	if (ks->have & GB_TS_ROBUST) {
		cJSON *r = cJSON_AddObjectToObject(o, "robust_list");
		cJSON_AddItemToObject(r, "head", hex(ks->robust_head));
		cJSON_AddNumberToObject(r, "len", (double)ks->robust_len);
	}
	if (ks->have & GB_TS_TID_ADDR)
		cJSON_AddItemToObject(o, "clear_child_tid", hex(ks->clear_tid));
	if (ks->have & GB_TS_RSEQ) {
		cJSON *r = cJSON_AddObjectToObject(o, "rseq");
		cJSON_AddItemToObject(r, "addr", hex(ks->rseq_addr));
		cJSON_AddNumberToObject(r, "len", ks->rseq_len);
		cJSON_AddItemToObject(r, "sig", hex(ks->rseq_sig));
	}
	if (ks->have & GB_TS_ALTSTACK) {
		cJSON *r = cJSON_AddObjectToObject(o, "sigaltstack");
		cJSON_AddItemToObject(r, "sp", hex(ks->ss_sp));
		cJSON_AddNumberToObject(r, "size", (double)ks->ss_size);
		cJSON_AddNumberToObject(r, "flags", ks->ss_flags);
	}
	if (ks->have & GB_TS_PENDING)
		add_pending(o, &ks->pending);
}

void gb_snap__json_tstate_apply(const cJSON *o, struct gb_snap_tstate *ks)
{
	const cJSON *v;
	double n;
	memset(ks, 0, sizeof(*ks));
	if ((v = item(o, "name")) && cJSON_IsString(v)) {
		strncpy(ks->name, v->valuestring, sizeof(ks->name) - 1);
		ks->have |= GB_TS_NAME;
	}
	if ((v = item(o, "robust_list")) && get_hex(item(v, "head"), &ks->robust_head) &&
	    get_num(item(v, "len"), &n)) {
		ks->robust_len = (uint64_t)n;
		ks->have |= GB_TS_ROBUST;
	}
	if (get_hex(item(o, "clear_child_tid"), &ks->clear_tid))
		ks->have |= GB_TS_TID_ADDR;
	uint64_t sig;
	if ((v = item(o, "rseq")) && get_hex(item(v, "addr"), &ks->rseq_addr) &&
	    get_num(item(v, "len"), &n) && get_hex(item(v, "sig"), &sig)) {
		ks->rseq_len = (uint32_t)n;
		ks->rseq_sig = (uint32_t)sig;
		ks->have |= GB_TS_RSEQ;
	}
	double f;
	if ((v = item(o, "sigaltstack")) && get_hex(item(v, "sp"), &ks->ss_sp) &&
	    get_num(item(v, "size"), &n) && get_num(item(v, "flags"), &f)) {
		ks->ss_size = (uint64_t)n;
		ks->ss_flags = (int32_t)f;
		ks->have |= GB_TS_ALTSTACK;
	}
	if ((v = item(o, "pending")) && get_pending(v, &ks->pending))
		ks->have |= GB_TS_PENDING;
}

static const char *const rlimit_names[GB_SNAP_NRLIMITS] = {
	"cpu", "fsize", "data", "stack", "core", "rss", "nproc", "nofile",
	"memlock", "as", "locks", "sigpending", "msgqueue", "nice", "rtprio", "rttime",
};

cJSON *gb_snap__json_pstate(const struct gb_snap_pstate *pk)
{
	cJSON *o = cJSON_CreateObject();
	if (pk->have & GB_PS_UMASK)
		cJSON_AddNumberToObject(o, "umask", pk->umask);
	if (pk->have & GB_PS_CWD)
		cJSON_AddStringToObject(o, "cwd", pk->cwd);
	if (pk->have & GB_PS_RLIMITS) {
		cJSON *r = cJSON_AddObjectToObject(o, "rlimits");
		for (int i = 0; i < GB_SNAP_NRLIMITS; i++) {
			cJSON *a = cJSON_CreateArray();
			cJSON_AddItemToArray(a, hex(pk->rlim[i].cur));
			cJSON_AddItemToArray(a, hex(pk->rlim[i].max));
			cJSON_AddItemToObject(r, rlimit_names[i], a);
		}
	}
	if (pk->have & GB_PS_SIGACTS) {
		cJSON *a = cJSON_AddArrayToObject(o, "sigactions");
		for (int i = 0; i < GB_SNAP_NSIG; i++) {
			const struct gb_snap_sigact *sa = &pk->sigact[i];
			if (!sa->handler && !sa->flags && !sa->mask)
				continue; /* SIG_DFL */
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "signal", i + 1);
			cJSON_AddItemToObject(e, "handler", hex(sa->handler));
			cJSON_AddItemToObject(e, "flags", hex(sa->flags));
			cJSON_AddItemToObject(e, "restorer", hex(sa->restorer));
			cJSON_AddItemToObject(e, "mask", hex(sa->mask));
			cJSON_AddItemToArray(a, e);
		}
	}
	if (pk->have & GB_PS_ITIMERS) {
		static const char *const which[3] = { "real", "virtual", "prof" };
		cJSON *t = cJSON_AddObjectToObject(o, "itimers");
		for (int i = 0; i < 3; i++) {
			const struct gb_snap_itimer *it = &pk->itimer[i];
			cJSON *a = cJSON_CreateArray();
			cJSON_AddItemToArray(a, cJSON_CreateNumber((double)it->int_sec));
			cJSON_AddItemToArray(a, cJSON_CreateNumber((double)it->int_usec));
			cJSON_AddItemToArray(a, cJSON_CreateNumber((double)it->val_sec));
			cJSON_AddItemToArray(a, cJSON_CreateNumber((double)it->val_usec));
			cJSON_AddItemToObject(t, which[i], a);
		}
	}
	cJSON_AddNumberToObject(o, "posix_timers", pk->posix_timers);
	cJSON_AddNumberToObject(o, "children", pk->children);
	if (pk->have & GB_PS_PENDING)
		add_pending(o, &pk->pending);
	return o;
}

int gb_snap__json_pstate_apply(const cJSON *o, struct gb_snap_pstate *pk)
{
	const cJSON *v, *e;
	double n;
	if (!cJSON_IsObject(o))
		return 0;
	if (get_num(item(o, "umask"), &n)) {
		pk->umask = (uint32_t)n;
		pk->have |= GB_PS_UMASK;
	}
	if ((v = item(o, "cwd")) && cJSON_IsString(v)) {
		if (!(pk->cwd = strdup(v->valuestring)))
			return -1;
		pk->have |= GB_PS_CWD;
	}
	if ((v = item(o, "rlimits")) && cJSON_IsObject(v)) {
		bool ok = true;
		for (int i = 0; i < GB_SNAP_NRLIMITS && ok; i++) {
			const cJSON *a = item(v, rlimit_names[i]);
			ok = get_hex(cJSON_GetArrayItem(a, 0), &pk->rlim[i].cur) &&
			     get_hex(cJSON_GetArrayItem(a, 1), &pk->rlim[i].max);
		}
		if (ok)
			pk->have |= GB_PS_RLIMITS;
	}
	if ((v = item(o, "sigactions")) && cJSON_IsArray(v)) {
		cJSON_ArrayForEach(e, v) {
			struct gb_snap_sigact sa;
			if (!get_num(item(e, "signal"), &n) || n < 1 || n > GB_SNAP_NSIG ||
			    !get_hex(item(e, "handler"), &sa.handler) || !get_hex(item(e, "flags"), &sa.flags) ||
			    !get_hex(item(e, "restorer"), &sa.restorer) || !get_hex(item(e, "mask"), &sa.mask))
				continue;
			pk->sigact[(int)n - 1] = sa;
		}
		pk->have |= GB_PS_SIGACTS;
	}
	if ((v = item(o, "itimers")) && cJSON_IsObject(v)) {
		static const char *const which[3] = { "real", "virtual", "prof" };
		bool ok = true;
		for (int i = 0; i < 3 && ok; i++) {
			const cJSON *a = item(v, which[i]);
			double f[4];
			for (int j = 0; j < 4 && ok; j++)
				ok = get_num(cJSON_GetArrayItem(a, j), &f[j]) && f[j] >= 0;
			if (ok)
				pk->itimer[i] = (struct gb_snap_itimer){ (uint64_t)f[0], (uint64_t)f[1],
									 (uint64_t)f[2], (uint64_t)f[3] };
		}
		if (ok)
			pk->have |= GB_PS_ITIMERS;
	}
	if (get_num(item(o, "posix_timers"), &n))
		pk->posix_timers = (uint32_t)n;
	if (get_num(item(o, "children"), &n))
		pk->children = (uint32_t)n;
	if ((v = item(o, "pending")) && get_pending(v, &pk->pending))
		pk->have |= GB_PS_PENDING;
	return 0;
}
