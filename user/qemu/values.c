/* values=on: instructions decoded, registers read, values formatted
 * (values.h). */
#include "qemu/values.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "decode/plan.h"
#include "record/linefmt.h"
#include "record/numfmt.h"

#define NKEYS (GB_WR_KINDS * 64)   /* gb_wreg_order's range */
#define VAL_MAX 16                 /* the widest register QEMU gives (xmm) */
#define HASH_BITS 12

static struct {
	pthread_mutex_t lock;
	bool known;                             /* the handles are learnt */
	struct qemu_plugin_register *handle[NKEYS];   /* by gb_wreg_order */
	int16_t at[NKEYS];                      /* by gb_wreg_order: its place in file */
	struct gb_wreg file[GB_QFILE_MAX];      /* QEMU's registers, in file order */
	int nfile;
	struct qinsn_node {
		struct qinsn_node *next;
		struct gb_qinsn in;
	} *insns[1u << HASH_BITS];
} V = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Where the instruction after in may be, from its decoding. */
static void next_of(struct gb_qinsn *q, const struct gb_insn *in)
{
	const ZydisDecodedInstruction *zi = &in->zi;
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INTO:
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT:
		q->next = GB_QNEXT_RAISES;
		return;
	case ZYDIS_MNEMONIC_INT:
		q->next = q->syscall ? GB_QNEXT_ANY : GB_QNEXT_RAISES;
		return;
	default:
		break;
	}
	if (in->flags & GB_INSN_REP) {
		q->next = GB_QNEXT_REP;
		return;
	}
	if (!(in->flags & GB_INSN_BRANCH)) {
		q->next = GB_QNEXT_FALL;
		return;
	}
	q->next = GB_QNEXT_ANY;
	switch (zi->meta.category) {
	case ZYDIS_CATEGORY_RET:
		q->next = GB_QNEXT_MEMVAL;
		break;
	case ZYDIS_CATEGORY_COND_BR: case ZYDIS_CATEGORY_UNCOND_BR: case ZYDIS_CATEGORY_CALL: {
		const ZydisDecodedOperand *o = &in->ops[0];
		ZyanU64 abs;
		if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
		    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(zi, o, in->pc, &abs))) {
			q->next = GB_QNEXT_DIRECT;
			q->target = abs;
		} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			q->next = GB_QNEXT_MEMVAL;
		}
		break;
	}
	default:
		break;
	}
}

static void decode(struct gb_qinsn *q, const uint8_t *bytes, size_t n)
{
	struct gb_insn in;
	q->next = GB_QNEXT_ANY;
	if (gb_decode(q->pc, bytes, n, &in))
		return;   /* (QEMU raises SIGILL for what Zydis refuses) */
	q->syscall = in.flags & GB_INSN_SYSCALL;
	q->writes_all = gb_insn_writes_all(&in);
	if (q->syscall) {
		/* the instruction's writes; rax is in the next regs line */
		q->w[0] = (struct gb_wreg){ GB_WR_GPR, GB_REG_RCX };
		q->w[1] = (struct gb_wreg){ GB_WR_GPR, GB_REG_R11 };
		q->nw = 2;
	} else if (!q->writes_all) {
		q->nw = (uint8_t)gb_insn_written(&in, q->w, GB_WREG_MAX);
	}
	next_of(q, &in);
}

const struct gb_qinsn *gb_qvals_insn(uint64_t pc, const uint8_t *bytes, size_t n)
{
	if (n > GB_INSN_MAX_LEN)
		n = GB_INSN_MAX_LEN;
	unsigned h = (unsigned)((pc ^ pc >> HASH_BITS) & ((1u << HASH_BITS) - 1));
	pthread_mutex_lock(&V.lock);
	struct qinsn_node *x;
	for (x = V.insns[h]; x; x = x->next)
		if (x->in.pc == pc && x->in.len == n && !memcmp(x->in.bytes, bytes, n))
			break;
	if (!x && (x = calloc(1, sizeof(*x)))) {
		x->in.pc = pc;
		x->in.len = (uint8_t)n;
		memcpy(x->in.bytes, bytes, n);
		decode(&x->in, bytes, n);
		x->next = V.insns[h];
		V.insns[h] = x;
	}
	pthread_mutex_unlock(&V.lock);
	return x ? &x->in : NULL;
}

static int by_order(const void *a, const void *b)
{
	unsigned x = gb_wreg_order(a), y = gb_wreg_order(b);
	return x < y ? -1 : x > y;
}

void gb_qvals_registers(void)
{
	if (__atomic_load_n(&V.known, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&V.lock);
	if (!V.known) {
		GArray *regs = qemu_plugin_get_registers();
		for (guint i = 0; regs && i < regs->len; i++) {
			qemu_plugin_reg_descriptor *d =
				&g_array_index(regs, qemu_plugin_reg_descriptor, i);
			struct gb_wreg r;
			if (!d->name || gb_wreg_parse(d->name, &r) || r.kind == GB_WR_YMM ||
			    r.kind == GB_WR_ZMM || r.kind == GB_WR_K)
				continue;
			unsigned o = gb_wreg_order(&r);
			if (o >= NKEYS || V.handle[o] || V.nfile == GB_QFILE_MAX)
				continue;
			V.handle[o] = d->handle;
			V.file[V.nfile++] = r;
		}
		if (regs)
			g_array_free(regs, TRUE);
		qsort(V.file, (size_t)V.nfile, sizeof(V.file[0]), by_order);
		memset(V.at, 0xff, sizeof(V.at));
		for (int i = 0; i < V.nfile; i++)
			V.at[gb_wreg_order(&V.file[i])] = (int16_t)i;
		__atomic_store_n(&V.known, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&V.lock);
}

static bool room(struct gb_qtext *t, size_t more)
{
	if (t->len + more <= t->cap)
		return true;
	size_t n = t->cap ? t->cap : 1024;
	while (n < t->len + more)
		n *= 2;
	char *s = realloc(t->s, n);
	if (!s)
		return false;
	t->s = s;
	t->cap = n;
	return true;
}

static int at_of(const struct gb_wreg *r)
{
	unsigned o = gb_wreg_order(r);
	return o < NKEYS && V.known ? V.at[o] : -1;
}

/* Register r's value now (rip: pc), zero-padded into b; false when QEMU
 * does not give it. */
static bool value(const struct gb_wreg *r, GByteArray *buf, uint64_t pc, uint8_t b[VAL_MAX])
{
	int i = at_of(r);
	memset(b, 0, VAL_MAX);
	if (i < 0)
		return false;
	if (r->kind == GB_WR_RIP) {
		memcpy(b, &pc, 8);
		return true;
	}
	g_byte_array_set_size(buf, 0);
	int got = qemu_plugin_read_register(V.handle[gb_wreg_order(r)], buf);
	if (got <= 0)
		return false;
	memcpy(b, buf->data, (size_t)got < VAL_MAX ? (size_t)got : VAL_MAX);
	return true;
}

/* "name":"0x...", after a comma unless first. */
static bool put(struct gb_qtext *t, const struct gb_wreg *r, const uint8_t b[VAL_MAX])
{
	if (!room(t, 24 + 2 * VAL_MAX + 8))
		return false;
	char name[16];
	gb_wreg_name(r, name, sizeof(name));
	t->len = (size_t)(gb_linefmt_reg(t->s + t->len, t->len <= 1, name, b, VAL_MAX) - t->s);
	return true;
}

static void said(struct gb_qknown *k, int i, const uint8_t b[VAL_MAX])
{
	memcpy(k->val[i], b, VAL_MAX);
	k->has[i] = true;
}

static bool begin(struct gb_qtext *t)
{
	if (!room(t, 64))
		return false;
	t->s[0] = '{';
	t->len = 1;
	return true;
}

static bool end(struct gb_qtext *t)
{
	if (!room(t, 2))
		return false;
	t->s[t->len++] = '}';
	t->s[t->len] = 0;
	return true;
}

bool gb_qvals_regs(struct gb_qtext *t, GByteArray *buf, const struct gb_wreg *w, int n,
		   struct gb_qknown *k)
{
	uint8_t b[VAL_MAX];
	if (!begin(t))
		return false;
	for (int j = 0; j < n; j++) {
		if (value(&w[j], buf, 0, b)) {
			if (!put(t, &w[j], b))
				return false;
			said(k, at_of(&w[j]), b);
		} else if (w[j].kind == GB_WR_YMM || w[j].kind == GB_WR_ZMM) {
			gb_qvals_forget(k, &(struct gb_wreg){ GB_WR_XMM, w[j].num });
		}
	}
	return end(t);
}

bool gb_qvals_file(struct gb_qtext *t, GByteArray *buf, uint64_t pc, struct gb_qknown *k)
{
	uint8_t b[VAL_MAX];
	if (!begin(t))
		return false;
	for (int i = 0; i < V.nfile; i++) {
		if (!value(&V.file[i], buf, pc, b) || (k->has[i] && !memcmp(k->val[i], b, VAL_MAX)))
			continue;
		if (!put(t, &V.file[i], b))
			return false;
		said(k, i, b);
	}
	return end(t);
}

void gb_qvals_forget(struct gb_qknown *k, const struct gb_wreg *r)
{
	int i = at_of(r);
	if (i >= 0)
		k->has[i] = false;
}

void gb_qtext_free(struct gb_qtext *t)
{
	free(t->s);
	t->s = NULL;
	t->len = t->cap = 0;
}

bool gb_qvals_mem(qemu_plugin_meminfo_t info, uint32_t size, uint8_t val[16])
{
	qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
	uint64_t lo = 0, hi = 0;
	switch (v.type) {
	case QEMU_PLUGIN_MEM_VALUE_U8: lo = v.data.u8; break;
	case QEMU_PLUGIN_MEM_VALUE_U16: lo = v.data.u16; break;
	case QEMU_PLUGIN_MEM_VALUE_U32: lo = v.data.u32; break;
	case QEMU_PLUGIN_MEM_VALUE_U64: lo = v.data.u64; break;
	case QEMU_PLUGIN_MEM_VALUE_U128: lo = v.data.u128.low; hi = v.data.u128.high; break;
	default: return false;
	}
	if (size > 16)
		return false;
	/* (the host is x86-64: its byte order is the guest's) */
	memcpy(val, &lo, 8);
	memcpy(val + 8, &hi, 8);
	return true;
}
