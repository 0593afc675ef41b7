/* Counting twins (docs/trace.md "Counting after the budget"): once the
 * trace's --max-events budget is full, gebpf only counts what the range
 * runs.  Each translated block gets a twin that runs the same original
 * instructions (gb_emit_moved) with no record, no lock and no ring, and
 * adds at its head the block's counts (instructions, reads, writes: known
 * when it is translated, each instruction's access plan) to counters in
 * the thread's own area (gs-relative: no two threads share one):
 *
 *   head:  add qword gs:[T_CSET(s)], n ; add gs:[+8], r ; add gs:[+16], w
 *          (where the flags are dead at the head: each status flag written
 *          before any is read, Zydis's cpu_flags; else flag-free:
 *          mov gs:[T_TWS], rax ; mov rax, gs:[C] ; lea rax, [rax+n] ;
 *          mov gs:[C], rax ... ; mov rax, gs:[T_TWS])
 *          <the instructions>
 *
 * Twins link to twins (a jcc/jmp rel32 to the target's twin, a fall-through
 * jump, a call pushing the ORIGINAL return address as the recording blocks
 * do), leave the range by plain jumps (no lock to release), and look ret
 * and indirect targets up in the recording blocks' table (its third
 * column, ibl.c; a miss inside the range is counted and logged at
 * NS_TMISSES / NS_TMISSLOG and goes on natively, as a recording lookup's
 * does).  A system call is the call, then rcx the original return address
 * and a jump to the twin of what follows (so a clone's child counts from
 * there in its own area).  An instruction a twin cannot count exactly (a
 * REP string instruction, a gather, a sign-masked move, popf, ud2/hlt/int)
 * ends the twin before it, and the twin of its address takes the lock and
 * enters its recording block (a "to-recording" entry: a U_NS entry unit
 * without owner check, unwound as an entry): its records are drained and
 * counted by gebpf as before.
 *
 * Twins are made by a pass (ns_twins) over every block and wanted pc that
 * has none: each twin's code is complete and every jump of it resolved
 * before it is published (the table's twin column, the acquire sites'
 * words: lock.c's twin_check), and never changes after, so gebpf can make
 * more while other threads run in the twins made before.  The switch is
 * NS_COUNT (gb_jit__counting).  Unwinding (twin_unwind.c) puts a thread
 * stopped in a twin at its original instruction and takes back the counts
 * of what it has not run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "decode/plan.h"
#include "jit/internal.h"
#include "jit/twin.h"

/* Twins are made while the code region is less full than this (percent):
 * the rest is kept for the recording blocks, which a trace cannot do
 * without (a range of 8,000 10-byte instructions, each translated as a
 * block of up to 16: tests/progs/pt_slot, 6.5 of its 7 MiB) made later
 * (a missed target, a re-entry), and a set-up makes its twins after its
 * blocks (gb_jit__twins). */
#define TW_ROOM_PCT 85

/* --- the pc -> twin map (open addressing, key 0 empty) --- */

static size_t tslot(const struct gb_jit *j, uint64_t pc)
{
	size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (j->tcap - 1);
	while (j->tk[h] && j->tk[h] != pc)
		h = (h + 1) & (j->tcap - 1);
	return h;
}

static uint64_t twin_of(const struct gb_jit *j, uint64_t pc, uint8_t *f)
{
	if (!j->tcap)
		return 0;
	size_t h = tslot(j, pc);
	if (j->tk[h] != pc)
		return 0;
	if (f)
		*f = j->tf[h];
	return j->tv[h];
}

static int twin_put(struct gb_jit *j, uint64_t pc, uint64_t addr, uint8_t f)
{
	if ((j->tn + 1) * 2 > j->tcap) {
		size_t oc = j->tcap, nc = oc ? oc * 2 : 1024;
		uint64_t *ok = j->tk, *ov = j->tv;
		uint8_t *of = j->tf;
		uint64_t *nk = calloc(nc, sizeof(*nk)), *nv = calloc(nc, sizeof(*nv));
		uint8_t *nf = calloc(nc, 1);
		if (!nk || !nv || !nf) {
			free(nk);
			free(nv);
			free(nf);
			return -ENOMEM;
		}
		j->tk = nk;
		j->tv = nv;
		j->tf = nf;
		j->tcap = nc;
		for (size_t k = 0; k < oc; k++)
			if (ok[k]) {
				size_t h = tslot(j, ok[k]);
				j->tk[h] = ok[k];
				j->tv[h] = ov[k];
				j->tf[h] = of[k];
			}
		free(ok);
		free(ov);
		free(of);
	}
	size_t h = tslot(j, pc);
	if (!j->tk[h])
		j->tn++;
	j->tk[h] = pc;
	j->tv[h] = addr;
	j->tf[h] = f;
	return 0;
}

void ns_twin_reset(struct gb_jit *j)
{
	if (j->tk)
		memset(j->tk, 0, j->tcap * sizeof(*j->tk));
	j->tn = j->ntl = j->nts = j->nts_seen = j->ntwant = 0;
}

uint64_t ns_twin_pub(const struct gb_jit *j, uint64_t pc)
{
	uint8_t f = 0;
	uint64_t t = twin_of(j, pc, &f);
	return t && !(f & TW_F_NEW) ? t : 0;
}

uint64_t gb_jit__twin(const struct gb_jit *j, uint64_t pc)
{
	uint8_t f = 0;
	uint64_t t = twin_of(j, pc, &f);
	return t && f == TW_F_TWIN ? t : 0;
}

void ns_twin_slot(struct gb_jit *j, uint64_t pc, uint32_t off)
{
	if (GB_GROW(&j->ts, &j->tscap, j->nts + 1)) {
		j->em.err = -ENOMEM;
		return;
	}
	j->ts[j->nts++] = (struct twslot){ pc, off };
}

static int want(struct gb_jit *j, uint64_t pc)
{
	if (GB_GROW(&j->twant, &j->twantcap, j->ntwant + 1))
		return -ENOMEM;
	j->twant[j->ntwant++] = pc;
	return 0;
}

/* --- what a twin can count --- */

bool ns_twin_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr)
{
	const struct gb_plan *p = &gi->plan;
	*rd = *wr = 0;
	if (!gb_jit__nostop_supported(gi) || (gi->flags & (GB_INSN_REP | GB_INSN_NEEDS_VEC)) ||
	    ns_is_popf(gi) || gi->zi.meta.category == ZYDIS_CATEGORY_INTERRUPT)
		return false;
	switch (gi->zi.mnemonic) {
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT:
		return false; /* (their recording path keeps their record at the fault) */
	default:
		break;
	}
	switch (p->kind) {
	case GB_PLAN_NONE:
		return true;
	case GB_PLAN_REFS:
	case GB_PLAN_BT:
	case GB_PLAN_STRING: /* (not REP: one pass) */
		for (unsigned k = 0; k < p->nrefs; k++) {
			if (p->refs[k].flags & GB_REF_INDEX_AL)
				return false;
			if (p->refs[k].flags & GB_REF_WRITE)
				++*wr;
			else
				++*rd;
		}
		return true;
	case GB_PLAN_ENTER: { /* jit.c's enter_refs: push rbp, L-1 frame pointers
			       * read and pushed, the new one pushed */
		unsigned l = p->level;
		if (l > ENTER_LEVELS)
			return false;
		*wr = 1 + (l > 1 ? l - 1 : 0) + (l ? 1 : 0);
		*rd = l > 1 ? l - 1 : 0;
		return true;
	}
	default:
		return false;
	}
}

/* Are the status flags dead at the head of the instructions v[0..n)?  Each
 * of CF PF AF ZF SF OF written (by an instruction that always writes it)
 * before any instruction reads it, within the block. */
static bool flags_dead(const struct gb_insn *v, size_t n)
{
	const uint32_t all = ZYDIS_CPUFLAG_CF | ZYDIS_CPUFLAG_PF | ZYDIS_CPUFLAG_AF |
			     ZYDIS_CPUFLAG_ZF | ZYDIS_CPUFLAG_SF | ZYDIS_CPUFLAG_OF;
	uint32_t written = 0;
	for (size_t i = 0; i < n; i++) {
		const ZydisAccessedFlags *f = v[i].zi.cpu_flags;
		if (!f || (f->tested & all & ~written))
			return false;
		switch (v[i].zi.mnemonic) {
		case ZYDIS_MNEMONIC_SHL: case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SAR:
		case ZYDIS_MNEMONIC_ROL: case ZYDIS_MNEMONIC_ROR: case ZYDIS_MNEMONIC_RCL:
		case ZYDIS_MNEMONIC_RCR: case ZYDIS_MNEMONIC_SHLD: case ZYDIS_MNEMONIC_SHRD:
			continue; /* a count of 0 leaves them: not a sure write */
		default:
			break;
		}
		written |= (f->modified | f->set_0 | f->set_1 | f->undefined) & all;
		if (written == all)
			return true;
		if (v[i].flags & GB_INSN_BRANCH || v[i].zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL)
			return false;
	}
	return false;
}

/* --- emission --- */

static const uint8_t SAVE_FLAGS[] = { 0x9f, 0x0f, 0x90, 0xc0 };    /* lahf ; seto al */
static const uint8_t LOAD_FLAGS[] = { 0x04, 0x7f, 0x9e };          /* add al, 0x7f ; sahf */

/* add qword gs:[slot], imm8 (or imm32) */
static void tls_add(struct gb_emit *m, int32_t slot, uint32_t imm)
{
	uint8_t b[13] = { 0x65, 0x48, 0x83, 0x04, 0x25, (uint8_t)slot, (uint8_t)(slot >> 8), 0, 0 };
	if (imm < 128) {
		b[9] = (uint8_t)imm;
		gb_emit_raw(m, b, 10);
		return;
	}
	b[2] = 0x81;
	memcpy(b + 9, &imm, 4);
	gb_emit_raw(m, b, sizeof(b));
}

/* The head's adds: tb (the block's counts) to counter set set (sign -1:
 * taken off, always flag-free: a loop's exit, below); each add's end in
 * done[] (0: none).  Flag-free unless dead. */
static void head(struct gb_jit *j, struct unit *u, const uint16_t tb[3], bool dead, unsigned set,
		 int sign)
{
	const int32_t slot[3] = { T_CSET(set), T_CSET(set) + 8, T_CSET(set) + 16 };
	struct gb_emit *m = &j->em;
	uint32_t *done[3] = { &u->o_b, &u->o_load, &u->o_commit };
	u->a = dead;
	if (!dead) {
		gb_emit_tls_store(m, T_TWS, GB_REG_RAX);
		u->o_flg = (uint32_t)m->used;
	}
	for (unsigned c = 0; c < 3; c++) {
		if (!tb[c])
			continue;
		if (dead) {
			tls_add(m, slot[c], tb[c]);
		} else {
			gb_emit_tls_load(m, GB_REG_RAX, slot[c]);
			gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_NONE, 0, sign * (int64_t)tb[c]);
			gb_emit_tls_store(m, slot[c], GB_REG_RAX);
		}
		*done[c] = (uint32_t)m->used;
	}
	if (!dead) {
		gb_emit_tls_load(m, GB_REG_RAX, T_TWS);
		u->o_sahf1 = (uint32_t)m->used;
	}
}

/* A jump (its rel32 at src) to the twin of target, or out of the range. */
static void link_to(struct gb_jit *j, size_t src, uint64_t target)
{
	uint64_t t = inside(j, target) ? twin_of(j, target, NULL) : target;
	if (t) {
		gb_emit_repoint(&j->em, src, t);
		return;
	}
	if (GB_GROW(&j->tl, &j->tlcap, j->ntl + 1) || want(j, target)) {
		j->em.err = -ENOMEM;
		return;
	}
	j->tl[j->ntl++] = (struct twlink){ (uint32_t)src, target };
}

static void jump_to(struct gb_jit *j, uint64_t target)
{
	size_t src = gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, gb_emit_here(&j->em));
	if (!j->em.err)
		link_to(j, src, target);
}

/* A call's push of its original return address, offsets in u: rax saved
 * (o_b), back (o_load), rsp moved (o_insn). */
static void push_ret(struct gb_jit *j, struct unit *u, uint64_t ret)
{
	static const uint8_t MOV_RSPM8_RAX[] = { 0x48, 0x89, 0x44, 0x24, 0xf8 };
	static const uint8_t LEA_RSP_M8[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8 };
	struct gb_emit *m = &j->em;
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	u->o_b = (uint32_t)m->used;
	gb_emit_mov_imm64(m, GB_REG_RAX, ret);
	gb_emit_raw(m, MOV_RSPM8_RAX, sizeof(MOV_RSPM8_RAX));
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	u->o_load = (uint32_t)m->used;
	gb_emit_raw(m, LEA_RSP_M8, sizeof(LEA_RSP_M8));
	u->o_insn = (uint32_t)m->used;
}

static void restore3(struct gb_emit *m)
{
	gb_emit_tls_load(m, GB_REG_RDX, T_RDX);
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	gb_emit_tls_load(m, GB_REG_RCX, T_RCX);
}

/* Count and log the missed target in rcx (rax, rdx, the flags clobbered:
 * saved by the caller):
 *   mov eax, 1 ; lock xadd [NS_TMISSES], rax ; and eax, 127
 *   lea rdx, [NS_TMISSLOG] ; mov [rdx+rax*8], rcx */
static void log_miss(struct gb_jit *j)
{
	struct gb_emit *m = &j->em;
	static const uint8_t AND_EAX[] = { 0x83, 0xe0, NS_TMISSLOG_N - 1 };
	static const uint8_t STORE[] = { 0x48, 0x89, 0x0c, 0xc2 };
	gb_emit_mov_imm32(m, GB_REG_RAX, 1);
	int64_t d = (int64_t)(daddr(j, NS_TMISSES) - (gb_emit_here(m) + 9));
	int32_t d32 = (int32_t)d;
	uint8_t x[9] = { 0xf0, 0x48, 0x0f, 0xc1, 0x05 };
	if (d != d32) {
		m->err = -EINVAL;
		return;
	}
	memcpy(x + 5, &d32, 4);
	gb_emit_raw(m, x, sizeof(x));
	gb_emit_raw(m, AND_EAX, sizeof(AND_EAX));
	gb_emit_lea_rip(m, GB_REG_RDX, daddr(j, NS_TMISSLOG));
	gb_emit_raw(m, STORE, sizeof(STORE));
}

/* A jump to an in-range target no twin can be made for: counted and
 * logged, then on natively (as a recording exit stub does). */
static uint64_t miss_stub(struct gb_jit *j, uint64_t target)
{
	struct gb_emit *m = &j->em;
	uint64_t at = gb_emit_here(m);
	struct unit *u = jit_unit_add(j, U_TWIN, target);
	if (!u)
		return 0;
	u->tw = TW_MISS;
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RDX, GB_REG_RDX);
	gb_emit_raw(m, SAVE_FLAGS, sizeof(SAVE_FLAGS));
	gb_emit_tls_store(m, T_FLG, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	gb_emit_mov_imm64(m, GB_REG_RCX, target);
	log_miss(j);
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf2 = (uint32_t)m->used;
	restore3(m);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, target);
	jit_unit_end(j, u);
	return at;
}

/* ret / indirect jmp / call: the lookup of ibl.c in the table's twin
 * column (see its comment), with no lock to release on the way out:
 *
 *   mov gs:[T_RCX], rcx ; mov gs:[T_RAX], rax ; mov gs:[T_RDX], rdx
 *   mov rcx, <target> ; mov gs:[T_TGT], rcx
 *   mov rax, TBL/8 ; mov ax, cx ; mov rdx, [rax*8] ; lea rcx, [rcx+rdx]
 *   jrcxz hit ; jmp miss
 *   hit:  mov rcx, [rax*8 + TWIN] ; jrcxz miss ; mov gs:[T_DST], rcx
 *   hit2: restore ; <ret: lea rsp / call: the push>
 *   o_hit: jmp gs:[T_DST]
 *   miss: lahf ; seto al ; mov gs:[T_FLG], rax ; the probe chain (to hit2)
 *         in the range: counted and logged
 *   out:  flags back ; restore ; <ret: lea rsp / call: the push>
 *   o_rel: jmp gs:[T_TGT] */
static void lookup(struct gb_jit *j, const struct gb_insn *gi, struct unit *u)
{
	static const uint8_t MOV_RCX_RSP0[] = { 0x48, 0x8b, 0x0c, 0x24 };
	static const uint8_t MOV_AX_CX[] = { 0x66, 0x89, 0xc8 };
	static const uint8_t LEA_RCX_RCX_RDX[] = { 0x48, 0x8d, 0x0c, 0x11 };
	static const uint8_t CMP_RCX_RDX[] = { 0x48, 0x39, 0xd1 };
	static const uint8_t LOAD_KEY[] = { 0x48, 0x8b, 0x14, 0xc5, 0, 0, 0, 0 };  /* mov rdx, [rax*8] */
	uint8_t LOAD_TWIN[8] = { 0x48, 0x8b, 0x0c, 0xc5 }; /* mov rcx, [rax*8 + the twin column] */
	int32_t twd = ns_twcol_disp(j);
	memcpy(LOAD_TWIN + 4, &twd, 4);
	struct gb_emit *m = &j->em;
	bool ret = gi->zi.mnemonic == ZYDIS_MNEMONIC_RET, call = gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL;
	uint64_t next = gi->pc + gi->len;
	int64_t pop = 8 + (ret && gi->zi.operand_count_visible ? gi->ops[0].imm.value.s : 0);
	struct unit scratch;
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RDX, GB_REG_RDX);
	if (ret)
		gb_emit_raw(m, MOV_RCX_RSP0, sizeof(MOV_RCX_RSP0));
	else
		gb_emit_load_target(m, GB_REG_RCX, gi);
	gb_emit_tls_store(m, T_TGT, GB_REG_RCX);
	gb_emit_mov_imm64(m, GB_REG_RAX, j->tbl / 8);
	gb_emit_raw(m, MOV_AX_CX, sizeof(MOV_AX_CX));
	gb_emit_raw(m, LOAD_KEY, sizeof(LOAD_KEY));
	gb_emit_raw(m, LEA_RCX_RCX_RDX, sizeof(LEA_RCX_RCX_RDX));
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + 5);
	size_t to_miss = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	gb_emit_raw(m, LOAD_TWIN, sizeof(LOAD_TWIN));
	size_t to_miss2 = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	gb_emit_tls_store(m, T_DST, GB_REG_RCX);
	uint64_t hit2 = gb_emit_here(m);
	restore3(m);
	if (ret)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	else if (call)
		push_ret(j, &scratch, next);
	u->o_hit = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_DST);
	/* miss */
	if (!m->err) {
		gb_emit_repoint(m, to_miss, gb_emit_here(m));
		if (m->used - (to_miss2 + 2) > 127)
			m->err = -EINVAL;
		else
			m->buf[to_miss2 + 1] = (uint8_t)(m->used - (to_miss2 + 2));
	}
	gb_emit_raw(m, SAVE_FLAGS, sizeof(SAVE_FLAGS));
	gb_emit_tls_store(m, T_FLG, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	ns_probe_chain(j, hit2, twd);
	gb_emit_tls_load(m, GB_REG_RCX, T_TGT);
	gb_emit_mov_imm64(m, GB_REG_RDX, j->start);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t below = gb_emit_jump(m, ZYDIS_MNEMONIC_JB, gb_emit_here(m));
	gb_emit_mov_imm64(m, GB_REG_RDX, j->end);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t above = gb_emit_jump(m, ZYDIS_MNEMONIC_JNBE, gb_emit_here(m));
	log_miss(j); /* in the range, no twin: on natively */
	if (!m->err) {
		gb_emit_repoint(m, below, gb_emit_here(m));
		gb_emit_repoint(m, above, gb_emit_here(m));
	}
	u->o_out = (uint32_t)m->used;
	gb_emit_tls_store(m, T_EXIT, GB_REG_RCX); /* (gebpf learns it: gb_jit__learn_exits) */
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf2 = (uint32_t)m->used;
	restore3(m);
	if (ret)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	else if (call)
		push_ret(j, &scratch, next);
	u->o_rel = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_TGT);
}

static bool direct(const struct gb_insn *gi)
{
	return gi->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && gi->ops[0].imm.is_relative;
}

/* The twin of a block whose first instruction no twin counts: take the
 * lock and enter its recording block (an entry unit without the owner
 * check: unwind.c's entry).  gebpf gone, the acquire's way on (T_BAIL) is
 * the instruction run natively, then the twin of what follows. */
static uint64_t to_recording(struct gb_jit *j, uint64_t pc, const struct gb_insn *gi)
{
	uint64_t blk = jit_block_of(j, pc);
	if (!blk || !gi)
		return 0;
	struct gb_emit *m = &j->em;
	uint64_t at = gb_emit_here(m);
	struct unit *u = jit_unit_add(j, U_NS, pc);
	if (!u)
		return 0;
	u->ns = GB_JIT_NS_ENTRY;
	size_t from = m->used, bail_at = 0;
	const uint64_t magic = 0x1122334455667788ull;
	ns_acquire(j, magic); /* (its way on once gebpf is gone: below) */
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, blk);
	jit_unit_end(j, u);
	uint64_t bail = gb_emit_here(m);
	for (size_t k = from; !m->err && !bail_at && k + 8 <= m->used; k++)
		if (!memcmp(m->buf + k, &magic, 8))
			bail_at = k;
	if (m->err || !bail_at) {
		m->err = m->err ? m->err : -EINVAL;
		return 0;
	}
	memcpy(m->buf + bail_at, &bail, 8);
	struct unit *n = jit_unit_add(j, U_TWIN, pc);
	if (!n)
		return 0;
	n->tw = TW_INSN; /* (uncounted: nobody counts once gebpf is gone) */
	gb_emit_moved(m, gi);
	jit_unit_end(j, n);
	struct unit *l = jit_unit_add(j, U_TWIN, gi->pc + gi->len);
	if (!l)
		return 0;
	l->tw = TW_LINK;
	jump_to(j, gi->pc + gi->len);
	jit_unit_end(j, l);
	return at;
}

/* The twin of the block at pc (*f its kind), or 0. */
static uint64_t twin_block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx,
			   bool translate, uint8_t *f)
{
	struct gb_insn in[GB_JIT_BLOCK_INSNS];
	uint16_t c[GB_JIT_BLOCK_INSNS][3];
	size_t n = 0;
	uint64_t at = pc;
	bool ends = false;
	while (n < GB_JIT_BLOCK_INSNS && inside(j, at)) {
		const struct gb_insn *gi = fetch(ctx, at);
		unsigned rd, wr;
		if (!gi || !ns_twin_countable(gi, &rd, &wr)) {
			if (!n && gi) { /* its recording block, taking the lock */
				in[0] = *gi;
				if (!jit_block_of(j, pc) && translate)
					gb_jit__block(j, pc, fetch, ctx);
				*f = TW_F_TOREC;
				return to_recording(j, pc, &in[0]);
			}
			break;
		}
		in[n] = *gi;
		c[n][0] = 1;
		c[n][1] = (uint16_t)rd;
		c[n][2] = (uint16_t)wr;
		n++;
		at = gi->pc + gi->len;
		if ((gi->flags & GB_INSN_BRANCH) || gi->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
			ends = true;
			break;
		}
	}
	if (!n)
		return 0;
	*f = TW_F_TWIN;
	/* rest[i]: the counts of in[i..n) (what a thread stopped at in[i] has
	 * not run) */
	uint16_t rest[GB_JIT_BLOCK_INSNS + 1][3] = { { 0 } };
	for (size_t i = n; i-- > 0;)
		for (unsigned k = 0; k < 3; k++)
			rest[i][k] = (uint16_t)(rest[i + 1][k] + c[i][k]);
	/* A block whose last instruction branches back to its own start (a
	 * tight loop) gets NS_CSETS copies branching to the next, the first
	 * counting NS_CSETS iterations at its head and the others nothing:
	 * one add per counter per NS_CSETS iterations (a chain through memory,
	 * store, load, add, and four micro-ops each: bench_budget.py's hash
	 * spent 33.6-36.0 CPU ns a call against 18.5-19.6 natively with an add
	 * per iteration; docs/benchmarks.md).  Leaving the loop from copy c
	 * takes back the iterations counted ahead (flag-free: TW_FIX). */
	const struct gb_insn *last = &in[n - 1];
	bool self = ends && (last->flags & GB_INSN_BRANCH) && !gb_jit__emulated(last) &&
		    last->zi.mnemonic != ZYDIS_MNEMONIC_SYSCALL &&
		    last->pc + last->len + (uint64_t)last->zi.raw.imm[0].value.s == pc;
	unsigned copies = self ? NS_CSETS : 1;
	bool dead = flags_dead(in, n);
	struct gb_emit *m = &j->em;
	uint64_t twin = gb_emit_here(m), copy0 = twin;
	size_t back = 0; /* the previous copy's branch to this one (rel32) */
	unsigned set = j->tset++ % NS_CSETS;
	uint16_t all[3], ahead[3];
	for (unsigned k = 0; k < 3; k++)
		all[k] = (uint16_t)(rest[0][k] * copies);
	for (unsigned cp = 0; cp < copies && !m->err; cp++) {
		uint64_t here = gb_emit_here(m);
		unsigned left = copies - 1 - cp; /* iterations counted ahead */
		for (unsigned k = 0; k < 3; k++)
			ahead[k] = (uint16_t)(rest[0][k] * left);
		if (cp)
			gb_emit_repoint(m, back, here);
		if (!cp) {
			struct unit *h = jit_unit_add(j, U_TWIN, pc);
			if (!h)
				return 0;
			h->tw = TW_HEAD;
			memcpy(h->tb, all, sizeof(h->tb));
			head(j, h, all, dead, set, 1);
			jit_unit_end(j, h);
		}
		for (size_t i = 0; i < n && !m->err; i++) {
			const struct gb_insn *gi = &in[i];
			uint64_t next = gi->pc + gi->len;
			struct unit *u = jit_unit_add(j, U_TWIN, gi->pc);
			if (!u)
				return 0;
			u->tw = TW_INSN;
			for (unsigned k = 0; k < 3; k++)
				u->tb[k] = (uint16_t)(rest[i][k] + ahead[k]);
			if (gi->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
				u->tw = TW_SYSCALL;
				u->tgt = next;
				gb_emit_raw(m, gi->bytes, gi->len);
				u->o_insn = (uint32_t)m->used;
				gb_emit_mov_imm64(m, GB_REG_RCX, next); /* (the kernel's rcx, natively) */
				jump_to(j, next);
				jit_unit_end(j, u);
				break;
			}
			if (gb_jit__emulated(gi)) {
				if (gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL && direct(gi)) {
					u->tw = TW_CALL;
					u->tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
					push_ret(j, u, next);
					jump_to(j, u->tgt);
				} else {
					u->tw = TW_LOOKUP;
					lookup(j, gi, u);
				}
				jit_unit_end(j, u);
				break;
			}
			if (gi->flags & GB_INSN_BRANCH) { /* jmp / jcc rel */
				uint64_t tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
				size_t src = gb_emit_jump(m, gi->zi.mnemonic, gb_emit_here(m));
				if (m->err)
					return 0;
				if (!self)
					link_to(j, src, tgt);
				else if (cp + 1 < copies)
					back = src; /* (to the next copy, made next) */
				else
					gb_emit_repoint(m, src, copy0);
				jit_unit_end(j, u);
				if (gi->zi.mnemonic != ZYDIS_MNEMONIC_JMP && left) {
					struct unit *x = jit_unit_add(j, U_TWIN, next);
					if (!x)
						return 0;
					x->tw = TW_FIX;
					memcpy(x->tb, ahead, sizeof(x->tb));
					head(j, x, ahead, false, set, -1);
					jit_unit_end(j, x);
				}
				if (gi->zi.mnemonic != ZYDIS_MNEMONIC_JMP) {
					struct unit *l = jit_unit_add(j, U_TWIN, next);
					if (!l)
						return 0;
					l->tw = TW_LINK;
					jump_to(j, next);
					jit_unit_end(j, l);
				}
				break;
			}
			gb_emit_moved(m, gi);
			jit_unit_end(j, u);
		}
		if (!ends) {
			struct unit *l = jit_unit_add(j, U_TWIN, at);
			if (!l)
				return 0;
			l->tw = TW_LINK;
			jump_to(j, at);
			jit_unit_end(j, l);
		}
	}
	return m->err ? 0 : twin;
}

/* --- the pass --- */

static uint64_t *tbl_view(const struct gb_jit *j)
{
	return (uint64_t *)(j->m.code + (j->tbl - j->m.code_addr));
}

/* The table's twin column of pc's slot (a lookup finds it from now on). */
static void table_twin(struct gb_jit *j, uint64_t pc, uint64_t twin)
{
	uint64_t *t = tbl_view(j);
	size_t i = pc & (NS_TBL_ENTRIES - 1);
	for (unsigned k = 0; k <= NS_TBL_PROBES; k++, i = (i + 1) & (NS_TBL_ENTRIES - 1))
		if (t[i] == -pc) {
			__atomic_store_n(&ns_twcol(j)[i], twin, __ATOMIC_RELEASE);
			return;
		}
}

/* Forget the twins of this pass (none was published): the map rebuilt
 * without them; their code stays, dead. */
static void forget_new(struct gb_jit *j)
{
	size_t cap = j->tcap;
	uint64_t *k = j->tk, *v = j->tv;
	uint8_t *f = j->tf;
	j->tk = NULL;
	j->tv = NULL;
	j->tf = NULL;
	j->tcap = j->tn = 0;
	for (size_t i = 0; i < cap; i++)
		if (k[i] && !(f[i] & TW_F_NEW))
			twin_put(j, k[i], v[i], f[i]);
	free(k);
	free(v);
	free(f);
}

void ns_twin_want(struct gb_jit *j, uint64_t pc)
{
	if (j->o.nostop && j->o.twins && want(j, pc))
		j->em.err = -ENOMEM;
}

void ns_twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx, bool translate)
{
	if (!j->o.nostop || !j->o.twins || j->em.err)
		return;
	/* the work: blocks translated since the last pass (gb_jit__block
	 * wants them), and acquire sites made since */
	if (j->nts_seen > j->nts)
		j->nts_seen = j->nts;
	for (size_t k = j->nts_seen; k < j->nts; k++)
		if (!twin_of(j, j->ts[k].pc, NULL) && want(j, j->ts[k].pc))
			return;
	bool sites = j->nts_seen < j->nts;
	j->nts_seen = j->nts;
	j->ntl = 0;
	uint64_t *failed = NULL, *made = NULL;
	size_t nfailed = 0, capfailed = 0, nmade = 0, capmade = 0;
	bool deferred = false;
	while (j->ntwant && !j->em.err) {
		uint64_t pc = j->twant[--j->ntwant];
		bool tried = false;
		for (size_t k = 0; k < nfailed; k++)
			tried |= failed[k] == pc;
		if (tried || twin_of(j, pc, NULL))
			continue;
		if (j->em.used > j->em.size / 100 * TW_ROOM_PCT) {
			/* the rest of the code region is the recording blocks':
			 * these keep recording (nothing of the pass published) */
			deferred = true;
			want(j, pc);
			j->stats.twin_full++;
			break;
		}
		uint8_t f = 0;
		uint64_t t = twin_block(j, pc, fetch, ctx, translate, &f);
		if (j->em.err)
			break;
		if (!t && !translate && f == TW_F_TOREC) {
			/* its recording block is not translated yet: the pass
			 * waits for one that may translate it (nothing of it
			 * published; its work kept) */
			deferred = true;
			want(j, pc);
			break;
		}
		int e = 0;
		if (t && !(e = twin_put(j, pc, t, f | TW_F_NEW)) &&
		    !(e = GB_GROW(&made, &capmade, nmade + 1)))
			made[nmade++] = pc;
		else if (!t && !(e = GB_GROW(&failed, &capfailed, nfailed + 1)))
			failed[nfailed++] = pc;
		if (e)
			j->em.err = -ENOMEM;
	}
	if (deferred) {
		for (size_t k = 0; k < nmade; k++)
			want(j, made[k]);
		free(failed);
		free(made);
		j->ntl = 0;
		forget_new(j);
		return;
	}
	/* every jump of the new twins resolved: to a twin, or counted as a
	 * miss */
	for (size_t k = 0; k < j->ntl && !j->em.err; k++) {
		uint64_t t = twin_of(j, j->tl[k].target, NULL);
		if (!t)
			t = miss_stub(j, j->tl[k].target);
		if (t)
			gb_emit_repoint(&j->em, j->tl[k].src, t);
	}
	free(failed);
	j->ntl = j->ntwant = 0;
	if (j->em.err) {
		free(made);
		forget_new(j);
		return; /* (em.err stays: the caller's) */
	}
	/* published: the table's column, the acquire sites' words */
	for (size_t k = 0; k < nmade; k++) {
		uint8_t f = 0;
		uint64_t t = twin_of(j, made[k], &f);
		twin_put(j, made[k], t, (uint8_t)(f & ~TW_F_NEW));
		j->stats.twins += f == (TW_F_TWIN | TW_F_NEW);
		table_twin(j, made[k], t);
	}
	free(made);
	for (size_t k = 0; (nmade || sites) && k < j->nts; k++) {
		uint64_t *w = (uint64_t *)(j->m.code + j->ts[k].off);
		uint64_t t = gb_jit__twin(j, j->ts[k].pc);
		if (t && *w == j->m.code_addr + j->ts[k].off + 8) /* (still its own way on) */
			__atomic_store_n(w, t, __ATOMIC_RELEASE);
	}
}

/* A target out of the range that lookups leave for often (a ret to the
 * range's callers): a key of the table whose twin is the target itself and
 * whose recording block is an exit (the lock released, then the jump), so
 * that a twin's lookup finds it without its miss path (flags saved, the
 * probe chain, the range's bounds).  Only into a free home slot: never
 * evicting a block of the range. */
unsigned gb_jit__learn_exits(struct gb_jit *j, unsigned nareas)
{
	unsigned n = 0;
	if (!j->o.nostop || !j->o.twins)
		return 0;
	uint64_t *t = tbl_view(j);
	for (unsigned k = 0; k < nareas && k < GB_JIT_TLS_COUNT; k++) {
		uint64_t *w = (uint64_t *)(j->m.data + NS_TLS + (size_t)k * GB_JIT_TLS_SIZE + T_EXIT);
		uint64_t pc = __atomic_exchange_n(w, 0, __ATOMIC_ACQ_REL);
		size_t i = pc & (NS_TBL_ENTRIES - 1);
		if (!pc || inside(j, pc) || t[i])
			continue;
		uint64_t at = gb_emit_here(&j->em);
		struct unit *x = jit_unit_add(j, U_NS, pc);
		if (!x)
			break;
		x->ns = GB_JIT_NS_EXIT;
		ns_leave(j, pc);
		jit_unit_end(j, x);
		if (j->em.err) {
			j->em.err = 0;
			break;
		}
		t[NS_TBL_ENTRIES + i] = at;
		ns_twcol(j)[i] = pc;
		__atomic_store_n(&t[i], -pc, __ATOMIC_RELEASE); /* (after its columns) */
		n++;
	}
	j->stats.exits_learned += n;
	return n;
}

int gb_jit__twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx)
{
	j->tw_auto = j->o.twins;
	ns_twins(j, fetch, ctx, true);
	int e = j->em.err;
	j->em.err = 0;
	return e;
}
