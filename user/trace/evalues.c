/* --values: what an in-range instruction read, wrote and computed, taken
 * around its single-step (docs/trace-format.md "Values").
 *
 * - A read's value is read from the target before the step, a write's
 *   after it (a read-modify-write has both); the registers the instruction
 *   writes (decode/written.h) are read after it.
 * - A regs line goes out before a thread's first instruction of each
 *   stretch: whenever something other than a traced step of it ran since
 *   its last line (it ran natively or in a syscall, a signal was delivered,
 *   it stepped outside the range, an instruction loaded the whole file).
 *   It lists every register whose value differs from what the trace said
 *   last for that thread (the whole file the first time), so that the
 *   trace alone gives every register's value at every instruction; the
 *   thread's known file (struct known) follows every line written.
 * - A syscall's line is written at its entry: it lists rcx and r11 (the
 *   instruction's); rax, the kernel's, is in the regs line before the
 *   thread's next instruction.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"
#include "decode/written.h"
#include "decode/xsave.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "record/linefmt.h"
#include "record/numfmt.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"

struct sbuf {
	char *s;
	size_t cap, len;
};

/* What the trace has said of one thread's registers (the file's order). */
struct known {
	pid_t tid;
	uint8_t (*val)[64];
	bool *has;
};

#define FILE_MAX (16 + 4 + 8 + 3 + 3 * 32 + 8)

struct eng_vals {
	/* The read values taken before the step: access k's bytes at
	 * mem + off[k], len[k] of them (< its size: unreadable). */
	uint8_t *mem;
	size_t mcap;
	size_t off[GB_MAX_ACCESSES];
	uint32_t len[GB_MAX_ACCESSES];
	uint8_t *xs;            /* the XSAVE area after the step (when needed) */
	size_t xcap, xlen;
	struct sbuf regs;       /* the exec line's regs object */
	struct sbuf file;       /* the regs line's (taken before the step) */
	bool file_ok;
	/* The register file: its registers in order, where each one is in it
	 * (index by kind and number, -1: not in this CPU's file). */
	struct gb_wreg reg[FILE_MAX];
	unsigned nreg;
	int16_t at[GB_WR_KINDS][32];
	struct known *known;    /* per thread */
	size_t nknown, known_cap;
	/* The regs line's registers (their values in pend), applied to the
	 * thread's known file when the line is written. */
	uint16_t pend_i[FILE_MAX];
	uint8_t pend[FILE_MAX][64];
	unsigned npend;
	char *text;             /* the values' texts */
	size_t tcap, tlen;
};

static void add_reg(struct eng_vals *v, unsigned kind, unsigned num)
{
	v->at[kind][num] = (int16_t)v->nreg;
	v->reg[v->nreg++] = (struct gb_wreg){ (uint8_t)kind, (uint8_t)num };
}

struct eng_vals *eng_vals_new(void)
{
	struct eng_vals *v = calloc(1, sizeof(struct eng_vals));
	if (!v)
		return NULL;
	memset(v->at, 0xff, sizeof(v->at));
	for (unsigned k = 0; k < 16; k++)
		add_reg(v, GB_WR_GPR, k);
	for (unsigned kind = GB_WR_RIP; kind <= GB_WR_GS_BASE; kind++)
		add_reg(v, kind, 0);
	for (unsigned k = 0; k < 8; k++)
		add_reg(v, GB_WR_ST, k);
	add_reg(v, GB_WR_FCTRL, 0);
	add_reg(v, GB_WR_FSTAT, 0);
	add_reg(v, GB_WR_MXCSR, 0);
	/* Vector registers as wide as this CPU has them enabled (XCR0). */
	uint64_t xcr0 = gb_xsave_xcr0();
	bool avx512 = (xcr0 & 0xe0) == 0xe0, avx = xcr0 & 4;
	unsigned nv = avx512 ? 32 : 16;
	for (unsigned k = 0; k < nv; k++)
		add_reg(v, GB_WR_XMM, k);
	for (unsigned k = 0; avx && k < nv; k++)
		add_reg(v, GB_WR_YMM, k);
	for (unsigned k = 0; avx512 && k < nv; k++)
		add_reg(v, GB_WR_ZMM, k);
	for (unsigned k = 0; avx512 && k < 8; k++)
		add_reg(v, GB_WR_K, k);
	return v;
}

/* Thread tid's known file (made on first use: nothing known). */
static struct known *known_of(struct eng_vals *v, pid_t tid)
{
	for (size_t k = 0; k < v->nknown; k++)
		if (v->known[k].tid == tid)
			return &v->known[k];
	if (GB_GROW(&v->known, &v->known_cap, v->nknown + 1))
		return NULL;
	struct known *t = &v->known[v->nknown];
	t->tid = tid;
	t->val = calloc(v->nreg, sizeof(*t->val));
	t->has = calloc(v->nreg, sizeof(*t->has));
	if (!t->val || !t->has) {
		free(t->val);
		free(t->has);
		return NULL;
	}
	v->nknown++;
	return t;
}

void eng_vals_free(struct eng_vals *v)
{
	if (!v)
		return;
	for (size_t k = 0; k < v->nknown; k++) {
		free(v->known[k].val);
		free(v->known[k].has);
	}
	free(v->known);
	free(v->mem);
	free(v->xs);
	free(v->regs.s);
	free(v->file.s);
	free(v->text);
	free(v);
}

static bool whole_file(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g);
static bool file_of(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g);

void eng_vals_before(struct gb_engine *e, size_t i, const struct user_regs_struct *regs,
		     const struct gb_access *acc, int nacc)
{
	struct eng_vals *v = e->vals;
	pid_t tid = eng_tid(e, i);
	/* A new stretch: the whole file, as it is before the instruction. */
	v->file_ok = !eng_th(e, i)->vals_synced && whole_file(v, tid, regs);
	size_t need = 0;
	for (int k = 0; k < nacc; k++)
		need += acc[k].write ? 0 : acc[k].size;
	if (GB_GROW(&v->mem, &v->mcap, need ? need : 1))
		need = 0;
	size_t at = 0;
	for (int k = 0; k < nacc; k++) {
		v->off[k] = at;
		v->len[k] = 0;
		if (acc[k].write || at + acc[k].size > need)
			continue;
		ssize_t n = gb_mem_read(tid, acc[k].addr, v->mem + at, acc[k].size);
		v->len[k] = n > 0 ? (uint32_t)n : 0;
		at += acc[k].size;
	}
}

/* A component of the XSAVE area after the step: its bytes, or NULL when it
 * is in its initial state (zeros) or absent. */
static const uint8_t *comp(const struct eng_vals *v, unsigned c, uint32_t need)
{
	uint32_t off, size;
	if (v->xlen < GB_XSAVE_MIN || !(*(const uint64_t *)(v->xs + GB_XSAVE_HDR) & (1ull << c)) ||
	    !gb_xsave_comp(c, &off, &size) || size < need || off + size > v->xlen)
		return NULL;
	return v->xs + off;
}

/* Register r's bytes after the step (out: 64 bytes); its size. */
static unsigned reg_bytes(const struct eng_vals *v, const struct gb_wreg *r,
			  const struct user_regs_struct *g, uint8_t *out)
{
	unsigned n = gb_wreg_size(r);
	uint64_t x = 0;
	memset(out, 0, 64);
	switch (r->kind) {
	case GB_WR_GPR: x = *gb_regs_field((struct user_regs_struct *)g, r->num); break;
	case GB_WR_RIP: x = g->rip; break;
	case GB_WR_EFLAGS:
		/* TF and RF are the tracer's: single-stepping sets TF (after a
		 * stepped popf the kernel shows it), the page trap's fault RF;
		 * a program never sees either (pushf pushes RF clear; docs/
		 * trace-format.md). */
		x = g->eflags & ~0x10100ull;
		break;
	case GB_WR_FS_BASE: x = g->fs_base; break;
	case GB_WR_GS_BASE: x = g->gs_base; break;
	default: {
		if (v->xlen < 512)
			return n;
		const uint8_t *xs = v->xs, *c;
		unsigned i = r->num;
		switch (r->kind) {
		case GB_WR_ST: memcpy(out, xs + 32 + 16 * i, 10); break;
		case GB_WR_FCTRL: memcpy(out, xs, 2); break;
		case GB_WR_FSTAT: memcpy(out, xs + 2, 2); break;
		case GB_WR_MXCSR: memcpy(out, xs + 24, 4); break;
		case GB_WR_XMM: case GB_WR_YMM: case GB_WR_ZMM:
			if (i < 16) {
				memcpy(out, xs + 160 + 16 * i, 16);
				if (r->kind != GB_WR_XMM && (c = comp(v, 2, 256)))
					memcpy(out + 16, c + 16 * i, 16);
				if (r->kind == GB_WR_ZMM && (c = comp(v, 6, 512)))
					memcpy(out + 32, c + 32 * i, 32);
			} else if ((c = comp(v, 7, 1024))) {
				memcpy(out, c + 64 * (i - 16), n);
			}
			break;
		case GB_WR_K:
			if ((c = comp(v, 5, 64)))
				memcpy(out, c + 8 * i, 8);
			break;
		default:
			break;
		}
		return n;
	}
	}
	memcpy(out, &x, 8);
	return n;
}

static bool put_reg_b(struct sbuf *o, const struct gb_wreg *r, const uint8_t *b, unsigned n)
{
	if (GB_GROW(&o->s, &o->cap, o->len + 16 + 4 + 2 * 64 + 4))
		return false;
	char name[16];
	gb_wreg_name(r, name, sizeof(name));
	o->len = (size_t)(gb_linefmt_reg(o->s + o->len, o->len <= 1, name, b, n) - o->s);
	return true;
}

static bool put_reg(struct eng_vals *v, struct sbuf *o, const struct gb_wreg *r,
		    const struct user_regs_struct *g)
{
	uint8_t b[64];
	unsigned n = reg_bytes(v, r, g, b);
	return put_reg_b(o, r, b, n);
}

static bool regs_begin(struct sbuf *o)
{
	if (GB_GROW(&o->s, &o->cap, 64))
		return false;
	o->s[0] = '{';
	o->len = 1;
	return true;
}

static void regs_end(struct sbuf *o)
{
	o->s[o->len++] = '}';
	o->s[o->len] = 0;
}

static bool needs_xstate(const struct gb_wreg *w, int n)
{
	for (int k = 0; k < n; k++)
		if (w[k].kind >= GB_WR_ST)
			return true;
	return false;
}

static void read_xstate(struct eng_vals *v, pid_t tid)
{
	if (gb_xstate_read(tid, &v->xs, &v->xcap, &v->xlen))
		v->xlen = 0;
}

/* The regs line before thread tid's next instruction (v->file): each
 * register of the file whose value differs from what the trace said last
 * (k), kept in v->pend until the line is written. */
static bool whole_file(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g)
{
	read_xstate(v, tid);
	return file_of(v, tid, g);
}

/* ... with the XSAVE area in v->xs already. */
static bool file_of(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g)
{
	struct sbuf *o = &v->file;
	struct known *k = known_of(v, tid);
	if (!k || !regs_begin(o))
		return false;
	bool ok = true;
	v->npend = 0;
	for (unsigned i = 0; i < v->nreg; i++) {
		uint8_t b[64];
		unsigned n = reg_bytes(v, &v->reg[i], g, b);
		if (k->has[i] && !memcmp(k->val[i], b, n))
			continue;
		ok &= put_reg(v, o, &v->reg[i], g);
		v->pend_i[v->npend] = (uint16_t)i;
		memcpy(v->pend[v->npend++], b, 64);
	}
	if (ok)
		regs_end(o);
	return ok;
}

/* The regs line written: thread tid's known file takes it. */
static void file_said(struct eng_vals *v, pid_t tid)
{
	struct known *k = known_of(v, tid);
	for (unsigned p = 0; k && p < v->npend; p++) {
		memcpy(k->val[v->pend_i[p]], v->pend[p], 64);
		k->has[v->pend_i[p]] = true;
	}
}

/* Register w written with bytes b (its size): the known file takes it; a
 * vector register's narrower views follow, its wider ones are no longer
 * known (SSE keeps the upper bits, VEX zeroes them: the next regs line
 * says). */
static void reg_said(struct eng_vals *v, struct known *k, const struct gb_wreg *w, const uint8_t *b)
{
	int i = v->at[w->kind][w->num & 31];
	if (i < 0)
		return;
	memcpy(k->val[i], b, 64);
	k->has[i] = true;
	static const uint8_t vec[3] = { GB_WR_XMM, GB_WR_YMM, GB_WR_ZMM };
	for (int x = 0; x < 3 && w->kind >= GB_WR_XMM && w->kind <= GB_WR_ZMM; x++) {
		int j = v->at[vec[x]][w->num & 31];
		if (j < 0 || vec[x] == w->kind)
			continue;
		if (vec[x] < w->kind) {
			memset(k->val[j], 0, 64);
			memcpy(k->val[j], b, gb_wreg_size(&(struct gb_wreg){ vec[x], 0 }));
			k->has[j] = true;
		} else {
			k->has[j] = false;
		}
	}
}

void eng_vals_unsync(struct gb_engine *e, size_t i)
{
	if (e->vals)
		eng_th(e, i)->vals_synced = false;
}

/* A value's text, appended to v->text (with its NUL). */
static bool put_val(struct eng_vals *v, const uint8_t *b, size_t n)
{
	if (GB_GROW(&v->text, &v->tcap, v->tlen + 2 * n + 4))
		return false;
	v->tlen += (size_t)gb_numfmt_hexle(v->text + v->tlen, b, n);
	v->text[v->tlen++] = 0;
	return true;
}

/* The bytes of written register w from an instruction's record (the code
 * cache's, user/jit/vals.c) at b: eflags from its lahf/seto word over the
 * flags known before it (k). */
static unsigned rec_reg(const struct eng_vals *v, const struct known *k, const struct gb_insn *insn,
			const struct gb_wreg *w, const uint8_t *b, uint8_t *out)
{
	unsigned n = gb_wreg_size(w);
	memset(out, 0, 64);
	if (w->kind != GB_WR_EFLAGS) {
		memcpy(out, b, n);
		return n;
	}
	int at = v->at[GB_WR_EFLAGS][0];
	uint64_t f = 0;
	memcpy(&f, k->val[at], 8);
	f = (f & ~0x8d5ull) | (b[1] & 0xd5u) | (b[0] & 1 ? 0x800u : 0);
	if (insn->zi.cpu_flags) { /* cld, std: DF */
		f &= ~(uint64_t)(insn->zi.cpu_flags->set_0 & ~0x8d5u);
		f |= insn->zi.cpu_flags->set_1 & ~0x8d5u;
	}
	memcpy(out, &f, 8);
	return 8;
}

static size_t words8(size_t bytes) { return (bytes + 7) / 8 * 8; }

static void commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
		   const struct gb_access *acc, int nacc, enum eng_vals_how how,
		   const struct eng_vals_rec *src)
{
	struct eng_vals *v = e->vals;
	struct ethread *t = eng_th(e, i);
	pid_t tid = eng_tid(e, i);
	if (t->vcpu < 0)
		t->vcpu = (int)e->next_vcpu++;
	bool ok = true;
	/* The regs line: the file as it was before this instruction. */
	if (!t->vals_synced) {
		ok = v->file_ok;
		if (ok && v->file.len > 2) /* (nothing changed: no line) */
			gb_jsonl__regs(e->out, (uint32_t)t->vcpu, v->file.s, e->vt);
		if (ok)
			file_said(v, tid);
	}
	/* A record's values (src): each reference's, then each register's. */
	const uint8_t *rv = NULL;
	if (src && src->vals && insn) {
		size_t off = 0;
		for (unsigned k = 0; k < insn->plan.nrefs; k++)
			off += words8(insn->plan.refs[k].size);
		rv = src->vals + off;
	}
	bool from_rec = rv && src->done;
	struct user_regs_struct after;
	struct gb_wreg w[GB_WREG_MAX];
	int nw = 0;
	if (how == ENG_VALS_SYSCALL) {
		/* At its entry stop: rcx and r11 are the instruction's. */
		w[nw++] = (struct gb_wreg){ GB_WR_GPR, 2 /* rcx */ };
		w[nw++] = (struct gb_wreg){ GB_WR_GPR, 11 /* r11 */ };
		ok &= gb_regs_get(tid, &after) == 0;
	} else if (how == ENG_VALS_DONE && insn && !gb_insn_writes_all(insn)) {
		nw = gb_insn_written(insn, w, GB_WREG_MAX);
		if (nw && !from_rec) {
			if (src && src->live)
				after = *src->live;
			else
				ok &= !src && gb_regs_get(tid, &after) == 0;
			if (needs_xstate(w, nw))
				read_xstate(v, tid);
		}
	}
	ok &= regs_begin(&v->regs);
	struct known *kn = known_of(v, tid);
	ok &= kn != NULL;
	for (int k = 0; ok && k < nw; k++) {
		uint8_t b[64];
		unsigned n;
		if (from_rec) {
			n = rec_reg(v, kn, insn, &w[k], rv, b);
			rv += words8(gb_wreg_size(&w[k]));
		} else {
			n = reg_bytes(v, &w[k], &after, b);
		}
		reg_said(v, kn, &w[k], b);
		ok &= put_reg_b(&v->regs, &w[k], b, n);
	}
	if (ok && how == ENG_VALS_SYSCALL && v->at[GB_WR_GPR][0] >= 0)
		kn->has[v->at[GB_WR_GPR][0]] = false; /* rax: the kernel's, said later */
	if (!ok) {
		gb_err("trace: thread %d at 0x%llx: cannot take the instruction's values", tid,
		       (unsigned long long)pc);
		eng_finish(e, GB_END_ERROR);
		return;
	}
	regs_end(&v->regs);
	/* The accesses' values: a read's from before, a write's from now (or
	 * the record's: access k is reference k). */
	const char *vals[GB_MAX_ACCESSES];
	size_t voff[GB_MAX_ACCESSES];
	uint8_t small[64], *buf = NULL;
	const uint8_t *av = src && src->vals && insn && nacc <= insn->plan.nrefs ? src->vals : NULL;
	v->tlen = 0;
	for (int k = 0; k < nacc; k++) {
		const uint8_t *recv = av;
		if (av)
			av += words8(insn->plan.refs[k].size);
		voff[k] = SIZE_MAX;
		size_t at = v->tlen;
		if (!acc[k].write) {
			const uint8_t *b = recv ? recv : v->len[k] == acc[k].size ? v->mem + v->off[k] : NULL;
			if (b && put_val(v, b, acc[k].size))
				voff[k] = at;
			continue;
		}
		if (recv && from_rec) {
			if (put_val(v, recv, acc[k].size))
				voff[k] = at;
			continue;
		}
		uint8_t *b = acc[k].size <= sizeof(small) ? small : (buf = realloc(buf, acc[k].size));
		if (b && gb_mem_read(tid, acc[k].addr, b, acc[k].size) == (ssize_t)acc[k].size &&
		    put_val(v, b, acc[k].size))
			voff[k] = at;
	}
	free(buf);
	for (int k = 0; k < nacc; k++)
		vals[k] = voff[k] == SIZE_MAX ? NULL : v->text + voff[k];
	for (int k = 0; k < nacc; k++)
		if (acc[k].write)
			gb_icache__note_write(e->ic, acc[k].addr, acc[k].size);
	gb_jsonl__insn_vals(e->out, (uint32_t)t->vcpu, pc, v->regs.s, acc, vals, nacc, e->vt);
	if (e->o.faults_cb)
		e->o.faults_cb(e->o.faults_ctx, e, tid, (uint32_t)t->vcpu, pc, e->vt);
	e->vt++;
	t->vals_synced = how == ENG_VALS_DONE && !(insn && gb_insn_writes_all(insn));
}

void eng_vals_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
		     const struct gb_access *acc, int nacc, enum eng_vals_how how)
{
	commit(e, i, pc, insn, acc, nacc, how, NULL);
}

void eng_vals_commit_rec(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
			 const struct gb_access *acc, int nacc, enum eng_vals_how how,
			 const struct eng_vals_rec *src)
{
	commit(e, i, pc, insn, acc, nacc, how, src);
}

void eng_vals_file_at(struct gb_engine *e, size_t i, const struct user_regs_struct *regs,
		      const uint8_t *xs, size_t xlen)
{
	struct eng_vals *v = e->vals;
	v->file_ok = false;
	if (GB_GROW(&v->xs, &v->xcap, xlen ? xlen : 1))
		return;
	memcpy(v->xs, xs, xlen);
	v->xlen = xlen;
	v->file_ok = file_of(v, eng_tid(e, i), regs);
}
