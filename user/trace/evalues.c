/* --values: what an in-range instruction read, wrote and computed, taken
 * around its single-step (docs/trace-format.md "Values").
 *
 * - A read's value is read from the target before the step, a write's
 *   after it (a read-modify-write has both); the registers the instruction
 *   writes (decode/written.h) are read after it.
 * - A thread's whole register file goes out as a regs line before its
 *   first instruction of each stretch: whenever something other than a
 *   traced step of it ran since its last line (it ran natively or in a
 *   syscall, a signal was delivered, it stepped outside the range, an
 *   instruction loaded the whole file), so that the trace alone gives
 *   every register's value at every instruction.
 * - A syscall's line is written at its entry: it lists rcx and r11 (the
 *   instruction's); rax, the kernel's, is in the regs line before the
 *   thread's next instruction.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "decode/written.h"
#include "decode/xsave.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "record/numfmt.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"

struct sbuf {
	char *s;
	size_t cap, len;
};

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
	char *text;             /* the values' texts */
	size_t tcap, tlen;
};

struct eng_vals *eng_vals_new(void) { return calloc(1, sizeof(struct eng_vals)); }

void eng_vals_free(struct eng_vals *v)
{
	if (!v)
		return;
	free(v->mem);
	free(v->xs);
	free(v->regs.s);
	free(v->file.s);
	free(v->text);
	free(v);
}

static bool grow(void *pp, size_t *cap, size_t need)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	void *q = realloc(*(void **)pp, n);
	if (!q)
		return false;
	*(void **)pp = q;
	*cap = n;
	return true;
}

static bool whole_file(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g);

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
	if (!grow(&v->mem, &v->mcap, need ? need : 1))
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
	case GB_WR_EFLAGS: x = g->eflags; break;
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

static bool put_reg(struct eng_vals *v, struct sbuf *o, const struct gb_wreg *r,
		    const struct user_regs_struct *g)
{
	uint8_t b[64];
	unsigned n = reg_bytes(v, r, g, b);
	if (!grow(&o->s, &o->cap, o->len + 16 + 4 + 2 * 64 + 4))
		return false;
	char *p = o->s + o->len;
	if (o->len > 1)
		*p++ = ',';
	*p++ = '"';
	p += gb_wreg_name(r, p, 16);
	memcpy(p, "\":\"", 3);
	p += 3;
	p += gb_numfmt_hexle(p, b, n);
	*p++ = '"';
	o->len = (size_t)(p - o->s);
	return true;
}

static bool regs_begin(struct sbuf *o)
{
	if (!grow(&o->s, &o->cap, 64))
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

/* The whole register file as a regs object (v->regs). */
static bool whole_file(struct eng_vals *v, pid_t tid, const struct user_regs_struct *g)
{
	struct sbuf *o = &v->file;
	read_xstate(v, tid);
	if (!regs_begin(o))
		return false;
	bool ok = true;
	for (unsigned k = 0; k < 16; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_GPR, (uint8_t)k }, g);
	for (unsigned kind = GB_WR_RIP; kind <= GB_WR_GS_BASE; kind++)
		ok &= put_reg(v, o, &(struct gb_wreg){ (uint8_t)kind, 0 }, g);
	for (unsigned k = 0; k < 8; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_ST, (uint8_t)k }, g);
	ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_FCTRL, 0 }, g);
	ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_FSTAT, 0 }, g);
	ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_MXCSR, 0 }, g);
	/* Vector registers as wide as this CPU has them enabled (XCR0). */
	uint64_t xcr0 = gb_xsave_xcr0();
	bool avx512 = (xcr0 & 0xe0) == 0xe0, avx = xcr0 & 4;
	unsigned nv = avx512 ? 32 : 16;
	for (unsigned k = 0; k < nv; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_XMM, (uint8_t)k }, g);
	for (unsigned k = 0; avx && k < nv; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_YMM, (uint8_t)k }, g);
	for (unsigned k = 0; avx512 && k < nv; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_ZMM, (uint8_t)k }, g);
	for (unsigned k = 0; avx512 && k < 8; k++)
		ok &= put_reg(v, o, &(struct gb_wreg){ GB_WR_K, (uint8_t)k }, g);
	if (ok)
		regs_end(o);
	return ok;
}

void eng_vals_unsync(struct gb_engine *e, size_t i)
{
	if (e->vals)
		eng_th(e, i)->vals_synced = false;
}

/* A value's text, appended to v->text (with its NUL). */
static bool put_val(struct eng_vals *v, const uint8_t *b, size_t n)
{
	if (!grow(&v->text, &v->tcap, v->tlen + 2 * n + 4))
		return false;
	v->tlen += (size_t)gb_numfmt_hexle(v->text + v->tlen, b, n);
	v->text[v->tlen++] = 0;
	return true;
}

void eng_vals_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
		     const struct gb_access *acc, int nacc, enum eng_vals_how how)
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
		if (ok)
			gb_jsonl__regs(e->out, (uint32_t)t->vcpu, v->file.s, e->vt);
	}
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
		ok &= gb_regs_get(tid, &after) == 0;
		if (needs_xstate(w, nw))
			read_xstate(v, tid);
	}
	ok &= regs_begin(&v->regs);
	for (int k = 0; ok && k < nw; k++)
		ok &= put_reg(v, &v->regs, &w[k], &after);
	if (!ok) {
		gb_err("trace: thread %d at 0x%llx: cannot take the instruction's values", tid,
		       (unsigned long long)pc);
		eng_finish(e, GB_END_ERROR);
		return;
	}
	regs_end(&v->regs);
	/* The accesses' values: a read's from before, a write's from now. */
	const char *vals[GB_MAX_ACCESSES];
	size_t voff[GB_MAX_ACCESSES];
	uint8_t small[64], *buf = NULL;
	v->tlen = 0;
	for (int k = 0; k < nacc; k++) {
		voff[k] = SIZE_MAX;
		if (!acc[k].write) {
			size_t at = v->tlen;
			if (v->len[k] == acc[k].size && put_val(v, v->mem + v->off[k], acc[k].size))
				voff[k] = at;
			continue;
		}
		uint8_t *b = acc[k].size <= sizeof(small) ? small : (buf = realloc(buf, acc[k].size));
		if (b && gb_mem_read(tid, acc[k].addr, b, acc[k].size) == (ssize_t)acc[k].size) {
			size_t at = v->tlen;
			if (put_val(v, b, acc[k].size))
				voff[k] = at;
		}
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
