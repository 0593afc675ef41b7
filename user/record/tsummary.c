/* A trace's summary for gebpf show (tsummary.h). */
#include "record/tsummary.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/grow.h"
#include "common/log.h"

static int add_vcpu(struct gb_tsummary *s, int64_t v)
{
	size_t lo = 0, hi = s->nvcpus;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->vcpus[mid] == v)
			return 0;
		if (s->vcpus[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (GB_GROW(&s->vcpus, &s->vcpus_cap, s->nvcpus + 1))
		return -ENOMEM;
	memmove(&s->vcpus[lo + 1], &s->vcpus[lo], (s->nvcpus - lo) * sizeof(*s->vcpus));
	s->vcpus[lo] = v;
	s->nvcpus++;
	return 0;
}

/* Count each register name of a regs object's text ({"rax":"0x1",...}). */
static int count_regs(struct gb_tsummary *s, const char *obj, size_t len)
{
	const char *p = obj, *e = obj + len;
	while ((p = memchr(p, '"', (size_t)(e - p)))) {
		const char *k = p + 1, *ke = memchr(k, '"', (size_t)(e - k));
		if (!ke || ke + 2 >= e || ke[1] != ':')
			break;
		size_t n = (size_t)(ke - k), i;
		for (i = 0; i < s->nwregs; i++)
			if (strlen(s->wregs[i].name) == n && !memcmp(s->wregs[i].name, k, n))
				break;
		if (i == s->nwregs && n < sizeof(s->wregs[0].name)) {
			if (GB_GROW(&s->wregs, &s->wregs_cap, s->nwregs + 1))
				return -ENOMEM;
			memcpy(s->wregs[i].name, k, n);
			s->wregs[i].name[n] = 0;
			s->wregs[i].n = 0;
			s->nwregs++;
		}
		if (i < s->nwregs)
			s->wregs[i].n++;
		const char *ve = ke + 3 < e ? memchr(ke + 3, '"', (size_t)(e - ke - 3)) : NULL;
		if (!ve)
			break;
		p = ve + 1;
	}
	return 0;
}

static int by_writes(const void *a, const void *b)
{
	const struct { char name[8]; uint64_t n; } *x = a, *y = b;
	return x->n != y->n ? (x->n < y->n ? 1 : -1) : strcmp(x->name, y->name);
}

int gb_tsummary_read(struct gb_treader *rd, struct gb_tsummary *s)
{
	const char *line;
	size_t len;
	int r;
	int64_t last_vcpu = INT64_MIN;
	memset(s, 0, sizeof(*s));
	s->fmt = gb_treader__format(rd);
	while ((r = gb_treader__next(rd, &line, &len)) > 0) {
		struct gb_tline l;
		if (gb_tline_parse(line, len, &l)) {
			if (!s->lines)   /* the first line: this is no trace at all */
				return gb_fail(-EINVAL, "show: %s: not an ELF snapshot, nor a trace (line %ld is "
					       "not a JSON object with \"t\")", gb_treader__name(rd),
					       gb_treader__lineno(rd));
			return gb_fail(-EINVAL, "show: %s:%ld: not a trace line (a JSON object with \"t\")",
				       gb_treader__name(rd), gb_treader__lineno(rd));
		}
		s->lines++;
		s->per_type[l.type]++;
		if (l.type == GB_TL_SUMMARY) {
			free(s->summary);
			if (!(s->summary = strndup(line, len)))
				return gb_fail(-ENOMEM, "show: out of memory");
			continue;
		}
		if (l.type == GB_TL_OTHER || l.type == GB_TL_REGS)
			continue;
		s->acc_vals += l.val != NULL;
		if (l.regs) {
			s->exec_regs++;
			if (count_regs(s, l.regs, l.regs_len))
				return gb_fail(-ENOMEM, "show: out of memory");
		}
		if (!s->has_pc || l.pc < s->pc_lo)
			s->pc_lo = l.pc;
		if (!s->has_pc || l.pc > s->pc_hi)
			s->pc_hi = l.pc;
		s->has_pc = true;
		if (l.vcpu != last_vcpu && (r = add_vcpu(s, l.vcpu)))
			return r;
		last_vcpu = l.vcpu;
	}
	gb_treader__stats(rd, &s->st);
	if (s->nwregs)
		qsort(s->wregs, s->nwregs, sizeof(*s->wregs), by_writes);
	return r;
}

static void print_json(const struct gb_tsummary *s, const char *name, FILE *out)
{
	cJSON *j = cJSON_CreateObject();
	char hex[24];
	cJSON_AddStringToObject(j, "trace", name);
	cJSON_AddStringToObject(j, "format", s->fmt == GB_TFORMAT_ZSTD ? "zstd" : "jsonl");
	cJSON_AddNumberToObject(j, "lines", (double)s->lines);
	cJSON *t = cJSON_AddObjectToObject(j, "types");
	for (int k = 0; k < GB_TL_NTYPES; k++)
		cJSON_AddNumberToObject(t, gb_tline_names[k], (double)s->per_type[k]);
	cJSON *v = cJSON_AddArrayToObject(j, "vcpus");
	for (size_t i = 0; i < s->nvcpus; i++)
		cJSON_AddItemToArray(v, cJSON_CreateNumber((double)s->vcpus[i]));
	if (s->has_pc) {
		snprintf(hex, sizeof(hex), "0x%" PRIx64, s->pc_lo);
		cJSON_AddStringToObject(j, "pc_lo", hex);
		snprintf(hex, sizeof(hex), "0x%" PRIx64, s->pc_hi);
		cJSON_AddStringToObject(j, "pc_hi", hex);
	} else {
		cJSON_AddNullToObject(j, "pc_lo");
		cJSON_AddNullToObject(j, "pc_hi");
	}
	if (s->exec_regs || s->acc_vals || s->per_type[GB_TL_REGS]) {
		cJSON *v = cJSON_AddObjectToObject(j, "values");
		cJSON_AddNumberToObject(v, "regs_lines", (double)s->per_type[GB_TL_REGS]);
		cJSON_AddNumberToObject(v, "exec_with_regs", (double)s->exec_regs);
		cJSON_AddNumberToObject(v, "accesses_with_val", (double)s->acc_vals);
		cJSON *w = cJSON_AddObjectToObject(v, "registers_written");
		for (size_t i = 0; i < s->nwregs; i++)
			cJSON_AddNumberToObject(w, s->wregs[i].name, (double)s->wregs[i].n);
	}
	cJSON *sum = s->summary ? cJSON_Parse(s->summary) : NULL;
	cJSON_AddItemToObject(j, "summary", sum ? sum : cJSON_CreateNull());
	if (s->fmt == GB_TFORMAT_ZSTD) {
		cJSON *z = cJSON_AddObjectToObject(j, "zstd");
		cJSON_AddNumberToObject(z, "frames", (double)s->st.frames);
		cJSON_AddNumberToObject(z, "skippable_frames", (double)s->st.skippable);
		cJSON_AddNumberToObject(z, "compressed_bytes", (double)s->st.raw_bytes);
		cJSON_AddNumberToObject(z, "bytes", (double)s->st.bytes);
		cJSON_AddBoolToObject(z, "truncated", s->st.truncated);
	}
	char *text = cJSON_PrintUnformatted(j);
	if (text)
		fprintf(out, "%s\n", text);
	free(text);
	cJSON_Delete(j);
}

void gb_tsummary_print(const struct gb_tsummary *s, const char *name, bool json, FILE *out)
{
	if (json) {
		print_json(s, name, out);
		return;
	}
	fprintf(out, "trace: %s (%s)\n", name, s->fmt == GB_TFORMAT_ZSTD ? "zstd" : "JSONL");
	if (s->fmt == GB_TFORMAT_ZSTD)
		fprintf(out, "zstd: %" PRIu64 " frame%s, %" PRIu64 " skippable (seek table), %" PRIu64
			     " bytes -> %" PRIu64 " bytes (%.1fx)%s\n",
			s->st.frames, s->st.frames == 1 ? "" : "s", s->st.skippable, s->st.raw_bytes, s->st.bytes,
			s->st.raw_bytes ? (double)s->st.bytes / (double)s->st.raw_bytes : 0.0,
			s->st.truncated ? "; the last frame is cut short (a killed trace?)" : "");
	fprintf(out, "lines: %" PRIu64 " (exec %" PRIu64 ", read %" PRIu64 ", write %" PRIu64 ", fault %" PRIu64
		     ", summary %" PRIu64 ", other %" PRIu64 "%s",
		s->lines, s->per_type[GB_TL_EXEC], s->per_type[GB_TL_READ], s->per_type[GB_TL_WRITE],
		s->per_type[GB_TL_FAULT], s->per_type[GB_TL_SUMMARY], s->per_type[GB_TL_OTHER],
		s->per_type[GB_TL_REGS] ? "" : ")\n");
	if (s->per_type[GB_TL_REGS])
		fprintf(out, ", regs %" PRIu64 ")\n", s->per_type[GB_TL_REGS]);
	fprintf(out, "vcpus: %zu", s->nvcpus);
	for (size_t i = 0; i < s->nvcpus && i < 16; i++)
		fprintf(out, "%s%" PRId64, i ? ", " : " (", s->vcpus[i]);
	fprintf(out, "%s\n", s->nvcpus > 16 ? ", ...)" : s->nvcpus ? ")" : "");
	if (s->has_pc)
		fprintf(out, "pc: 0x%" PRIx64 "-0x%" PRIx64 "\n", s->pc_lo, s->pc_hi);
	else
		fprintf(out, "pc: none\n");
	if (s->exec_regs || s->acc_vals || s->per_type[GB_TL_REGS]) {
		uint64_t acc = s->per_type[GB_TL_READ] + s->per_type[GB_TL_WRITE];
		fprintf(out, "values: %" PRIu64 " of %" PRIu64 " exec lines with registers, %" PRIu64 " of %" PRIu64
			     " accesses with a value, %" PRIu64 " regs lines",
			s->exec_regs, s->per_type[GB_TL_EXEC], s->acc_vals, acc, s->per_type[GB_TL_REGS]);
		for (size_t i = 0; i < s->nwregs && i < 8; i++)
			fprintf(out, "%s%s %" PRIu64, i ? ", " : "; most written: ", s->wregs[i].name, s->wregs[i].n);
		fprintf(out, "\n");
	}
	fprintf(out, "summary: %s\n", s->summary ? s->summary : "none (a trace cut before its end?)");
}

void gb_tsummary_free(struct gb_tsummary *s)
{
	free(s->vcpus);
	free(s->summary);
	free(s->wregs);
	memset(s, 0, sizeof(*s));
}
