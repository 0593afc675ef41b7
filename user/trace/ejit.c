/* The translating engine (docs/trace.md "Engines"): the owner runs the
 * range's code translated in a code cache (user/jit) instead of being
 * single-stepped; its records come back through a shared ring and become
 * the same lines, through the same eng_commit, as the step engine's.
 *
 * - The cache is a shared anonymous mapping made in the target by injected
 *   mmap/mprotect, near the range (RIP-relative operands must reach), and
 *   mapped by gebpf through /proc/PID/map_files.  It is unmapped at the end.
 * - The owner runs with PTRACE_SYSCALL: an exit stub's getpid stops it at
 *   its entry; the syscall is skipped (orig_rax -1) and at its exit stop
 *   the thread is put at the stub's original target with its registers.
 * - Any other stop (a signal, an interrupt for the end) finds the thread at
 *   some cache address: gb_jit__locate says which original instruction it
 *   stands for, the scratch registers are reloaded and the thread is put
 *   there; a fault raised by a translated instruction is that
 *   instruction's (its exec line and completed accesses, as when stepped).
 *   So a signal handler, a snapshot or a detach only ever sees original
 *   addresses, and the step engine takes over from there.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "decode/plan.h"
#include "jit/jit.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"
#include "trace/jitmap.h"

struct gb_ejit {
	bool failed;             /* no cache in this image: step engine only */
	struct gb_jit *j;
	uint8_t *view;           /* gebpf's mapping of the region */
	uint64_t addr;           /* the region in the target (0: not made) */
	uint64_t range_gen;      /* the range (its gen) the translations are for */
	uint64_t image_gen;      /* the image (e->image_gen) the region is in */
	uint64_t epoch;          /* icache epoch the translations were checked at */
	uint64_t fs_base, gs_base;
	/* The owner's run in translated code: */
	bool at_exit;            /* between an exit stub's syscall entry and exit stops */
	bool give_back;          /* ... after which it goes to the step engine */
	bool interrupted;        /* interrupted for the end */
	uint64_t iter;
	/* --values: the registers at the stretch's start (the regs line
	 * before its first record, when its thread's file is not said yet) */
	bool file_pending;
	struct user_regs_struct start;
	uint8_t *start_xs;
	size_t start_xcap, start_xlen;
};

struct gb_ejit *eng_jit_new(void) { return calloc(1, sizeof(struct gb_ejit)); }

static void drop_region(struct gb_ejit *x)
{
	gb_jit__free(x->j);
	x->j = NULL;
	if (x->view)
		munmap(x->view, GB_JIT_SIZE);
	x->view = NULL;
	x->addr = 0;
}

void eng_jit_free(struct gb_engine *e)
{
	if (!e->jit)
		return;
	drop_region(e->jit);
	free(e->jit->start_xs);
	free(e->jit);
	e->jit = NULL;
}

/* After an exec the region went with the old image: true (forgotten). */
static bool old_image(struct gb_engine *e)
{
	struct gb_ejit *x = e->jit;
	if (x->image_gen == e->image_gen)
		return false;
	drop_region(x);
	x->failed = false;
	x->image_gen = e->image_gen;
	return true;
}

/* Make the region in the target and map it here. */
static int setup(struct gb_engine *e, size_t i)
{
	struct gb_ejit *x = e->jit;
	struct gb_jitmap m;
	int r = gb_jitmap_map(e->t->pid, e->t->threads[i].tid, e->range->start, e->range->end,
			      "the step engine traces the range", &m, &e->t->threads[i].pending_sig);
	if (r)
		return r;
	x->view = m.view;
	x->addr = m.addr;
	return 0;
}

/* The munmap, injected into stopped thread i: true when it is gone. */
static bool unmap_from(struct gb_engine *e, size_t i)
{
	return gb_jitmap_unmap_in(e->t->pid, e->t->threads[i].tid, e->jit->addr,
				  &e->t->threads[i].pending_sig) == 0;
}

bool eng_jit_unmap(struct gb_engine *e, size_t i)
{
	struct gb_ejit *x = e->jit;
	if (!x || old_image(e) || !x->addr)
		return true;
	if (eng_state(e, i) != T_STOPPED || !unmap_from(e, i))
		return false;
	drop_region(x);
	return true;
}

void eng_jit_forget(struct gb_engine *e)
{
	struct gb_ejit *x = e->jit;
	if (!x || old_image(e) || !x->addr)
		return;
	if (eng_live(e))
		gb_warn("pid %d: the code cache at 0x%llx stays mapped (never entered again)", e->t->pid,
			(unsigned long long)x->addr);
	drop_region(x);
}

static const struct gb_insn *fetch(void *ctx, uint64_t pc)
{
	struct gb_engine *e = ctx;
	int err = 0;
	return gb_icache__get(e->ic, e->t->pid, pc, &err);
}

/* Translations are of the range's bytes when they were made: re-check
 * them (one read) when code may have changed since. */
static void revalidate(struct gb_engine *e)
{
	struct gb_ejit *x = e->jit;
	uint64_t ep = gb_icache__epoch(e->ic);
	if (ep == x->epoch)
		return;
	x->epoch = ep;
	size_t n = gb_jit__ninsns(x->j);
	uint64_t lo, hi, pc;
	const uint8_t *b;
	uint8_t len;
	if (!n)
		return;
	gb_jit__span(x->j, &lo, &hi);
	uint8_t *buf = malloc(hi - lo);
	bool same = buf && gb_mem_read(e->t->pid, lo, buf, hi - lo) == (ssize_t)(hi - lo);
	if (same)
		gb_icache__patch(e->ic, lo, buf, hi - lo); /* (a probe's int3) */
	for (size_t k = 0; same && k < n; k++) {
		gb_jit__insn_bytes(x->j, k, &pc, &b, &len);
		same = !memcmp(buf + (pc - lo), b, len);
	}
	free(buf);
	if (!same) {
		gb_info("trace: the range's code changed: translations dropped");
		gb_jit__flush(x->j);
	}
}

/* One record, with its values (--values): those the cache took, else
 * (live: the thread's registers after it) the thread's.  A last record
 * whose values are neither (the thread gone in the middle of taking them)
 * is not written: its instruction did not complete for the trace. */
static void commit_vals(struct gb_engine *e, size_t i, const struct gb_jit_rec *rec, int n,
			bool last, const struct gb_stop *fault, const struct user_regs_struct *live)
{
	struct gb_ejit *x = e->jit;
	if (x->file_pending && !eng_th(e, i)->vals_synced)
		eng_vals_file_at(e, i, &x->start, x->start_xs, x->start_xlen);
	x->file_pending = false;
	const struct gb_insn *insn = fetch(e, rec->pc);
	struct eng_vals_rec src = { rec->vals, rec->vdone, NULL };
	bool faulted = last && fault;
	if (!rec->vdone && !faulted) {
		if (!last || !live)
			return;
		src.live = live;
	}
	eng_vals_commit_rec(e, i, rec->pc, insn, rec->acc, n,
			    faulted ? ENG_VALS_FAULTED : ENG_VALS_DONE, &src);
}

/* Make the ring's records lines.  fault: the last record's instruction
 * raised this signal (its completed accesses only); live (--values): the
 * thread's registers after the last record's instruction, when the cache
 * did not take its values (a stop after it, or gebpf performed it). */
static void drain(struct gb_engine *e, size_t i, const struct gb_stop *fault,
		  const struct user_regs_struct *live)
{
	struct gb_ejit *x = e->jit;
	size_t pos = 0, used = gb_jit__ring_used(x->j);
	struct gb_jit_rec rec;
	int r;
	gb_jsonl__batch(e->out, true); /* (only line functions until it is off) */
	while ((r = gb_jit__ring_next(x->j, &pos, x->fs_base, x->gs_base, &rec)) == 1) {
		if (eng_max_insns_done(e)) {
			eng_finish(e, GB_END_MAX_INSNS);
			break;
		}
		int n = rec.nacc;
		if (fault && pos == used) {
			int d = eng_fault_done(rec.pc, rec.len, rec.acc, rec.nacc, fault, rec.pc);
			n = d >= 0 ? d : n;
		}
		if (e->vals)
			commit_vals(e, i, &rec, n, pos == used, fault, live);
		else
			eng_commit(e, i, rec.pc, rec.acc, n);
		e->st.jit_insns++;
	}
	gb_jsonl__batch(e->out, false);
	if (r < 0) {
		gb_err("trace: the code cache's ring holds a record gebpf did not write");
		eng_finish(e, GB_END_ERROR);
	}
	gb_jit__ring_reset(x->j);
}

/* Put thread i (stopped in the cache, regs r) at the original instruction
 * loc stands for. */
static void restore(struct gb_engine *e, struct user_regs_struct *r, const struct gb_jit_loc *loc)
{
	for (unsigned k = 0; k < GB_REG_COUNT; k++)
		if (loc->restore & (1u << k))
			*gb_regs_field(r, k) = gb_jit__saved(e->jit->j, k);
	r->rip = loc->pc;
}

static int put_back(struct gb_engine *e, size_t i, struct user_regs_struct *r,
		    const struct gb_jit_loc *loc)
{
	restore(e, r, loc);
	return gb_regs_set(e->t->threads[i].tid, r);
}

/* A signal's si_addr that names the faulting instruction (SIGILL, SIGFPE)
 * names the original one. */
static void fix_siginfo(pid_t tid, uint64_t cache_rip, uint64_t pc)
{
	siginfo_t si;
	if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && (uint64_t)si.si_addr == cache_rip) {
		si.si_addr = (void *)pc;
		ptrace(PTRACE_SETSIGINFO, tid, 0, &si);
	}
}

enum after { GO_ON, GIVE_BACK, GONE };

/* Put thread i back at the original instruction loc stands for: the
 * records so far become lines (with fault: the last one is the instruction
 * that raised it), the record of an instruction not run is dropped, the
 * registers are its own.  0, or -errno when the thread cannot be set. */
static int back(struct gb_engine *e, size_t i, struct user_regs_struct *r,
		const struct gb_jit_loc *loc, const struct gb_stop *fault)
{
	if (!fault)
		gb_jit__ring_unwrite(e->jit->j, loc->unwrite);
	restore(e, r, loc);
	drain(e, i, fault, loc->post ? r : NULL);
	return gb_regs_set(e->t->threads[i].tid, r);
}

/* Perform the call, ret or indirect jmp at r->rip (its registers before
 * it) as the hardware does: 0, or -errno (then nothing was changed). */
static int emulate(struct gb_engine *e, struct user_regs_struct *r)
{
	pid_t pid = e->t->pid;
	const struct gb_insn *in = fetch(e, r->rip);
	if (!in)
		return -EINVAL;
	uint64_t next = r->rip + in->len, target = 0;
	if (in->zi.mnemonic == ZYDIS_MNEMONIC_RET) {
		if (gb_mem_read(pid, r->rsp, &target, 8) != 8)
			return -EFAULT;
		r->rsp += 8 + (in->zi.operand_count_visible ? (uint16_t)in->ops[0].imm.value.u : 0);
		r->rip = target;
		return 0;
	}
	const ZydisDecodedOperand *o = &in->ops[0];
	if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative) {
		target = next + (uint64_t)o->imm.value.s;
	} else if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		unsigned k = gb_reg_slot(o->reg.value);
		if (k == GB_REG_NONE)
			return -EINVAL;
		target = *gb_regs_field(r, k);
	} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
		struct gb_cpu cpu;
		struct gb_access acc[GB_MAX_ACCESSES];
		gb_cpu_from_regs(&cpu, r);
		int n = gb_insn_accesses(in, &cpu, acc, GB_MAX_ACCESSES);
		int k = 0;
		while (k < n && (acc[k].write || acc[k].size != 8))
			k++;
		if (k >= n || gb_mem_read(pid, acc[k].addr, &target, 8) != 8)
			return -EFAULT;
	} else {
		return -EINVAL;
	}
	if (in->zi.mnemonic == ZYDIS_MNEMONIC_CALL) {
		if (gb_mem_write(pid, r->rsp - 8, &next, 8) != 8)
			return -EFAULT;
		r->rsp -= 8;
	}
	r->rip = target;
	return 0;
}


/* An exit stub's getpid stopped owner i: it is skipped; the thread goes on
 * at the stub's target (after the call, ret or jump it stands for): in
 * translated code, natively (out of the range: one stop for the whole
 * exit), or stopped for the step engine (at the skipped syscall's exit
 * stop, so that a single-step starts cleanly). */
static enum after on_exit_stub(struct gb_engine *e, size_t i, struct user_regs_struct *r,
			       struct gb_jit_loc *loc, bool *at_exit, bool *give_back)
{
	struct gb_ejit *x = e->jit;
	pid_t tid = e->t->threads[i].tid;
	struct gb_jit_loc here = *loc;
	here.unwrite = 0;
	r->orig_rax = (unsigned long long)-1; /* skipped */
	if (put_back(e, i, r, &here))  /* registers restored, rip: the target */
		return GONE;
	bool performed = loc->emulate;
	if (loc->emulate && emulate(e, r)) {
		gb_jit__ring_unwrite(x->j, loc->unwrite); /* stepped instead */
		r->rip = loc->pc;
		performed = false;
	}
	drain(e, i, NULL, performed ? r : NULL);
	uint64_t pc = r->rip, blk = 0;
	bool inr = eng_in_range(e, pc);
	if (inr && !e->ended)
		blk = gb_jit__block(x->j, pc, fetch, e);
	if (!inr && !e->ended && TRAP_OPS(e)->leave_native) {
		/* Out of the range: it runs natively from here (when the trap
		 * must be set again first, the step engine takes it), or, a
		 * handler on the range returning through its restorer, to its
		 * rt_sigreturn (ehandler.c). */
		if (gb_regs_set(tid, r))
			return GONE;
		if (eng_handler_frame_left(e, i, r))
			return GONE;
		eng_set_owner(e, -1);
		eng_resume(e, i, PTRACE_CONT, 0, T_NATIVE);
		return GONE;
	}
	if (blk)
		r->rip = blk;
	if (gb_regs_set(tid, r))
		return GONE;
	*at_exit = true;
	*give_back = !blk;
	return GO_ON;
}

/* A stop of the owner in translated code: what now. */
static enum after on_stop(struct gb_engine *e, size_t i, const struct gb_stop *st, bool *at_exit,
			  bool *give_back)
{
	struct gb_ejit *x = e->jit;
	pid_t tid = e->t->threads[i].tid;
	struct user_regs_struct r;
	struct gb_jit_loc loc;
	e->st.jit_stops++;
	if (st->kind == GB_STOP_EXITED || st->kind == GB_STOP_KILLED) {
		drain(e, i, NULL, NULL);
		eng_on_exit(e, i, st);
		return GONE;
	}
	if (gb_regs_get(tid, &r)) {
		eng_set_state(e, i, T_DYING);
		return GONE;
	}
	if (st->kind == GB_STOP_SYSCALL && !st->sys_exit && !*at_exit &&
	    gb_jit__locate(x->j, r.rip, &loc) == 0 && loc.stub_call)
		return on_exit_stub(e, i, &r, &loc, at_exit, give_back);
	if (st->kind == GB_STOP_SYSCALL && st->sys_exit && *at_exit) {
		/* the skipped getpid's exit: the registers are set already */
		*at_exit = false;
		return *give_back ? GIVE_BACK : GO_ON;
	}
	if (gb_jit__locate(x->j, r.rip, &loc)) {
		gb_err("trace: thread %d stopped at 0x%llx, outside the code it was given",
		       tid, (unsigned long long)r.rip);
		eng_finish(e, GB_END_ERROR);
		return GIVE_BACK;
	}
	if (st->kind == GB_STOP_SIGNAL) {
		switch (trap_classify(e, i, st, loc.at_insn ? GB_AT_JIT : GB_AT_JIT_STUB, loc.pc)) {
		case GB_TRAP_SWALLOW:
		case GB_TRAP_ENTRY:
		case GB_TRAP_STEP:
			return GO_ON; /* the trap's signal from before: never delivered */
		case GB_TRAP_WATCH:
			/* The program changed the range's protections: re-check the
			 * translations before going on. */
			gb_icache__bump(e->ic);
			return back(e, i, &r, &loc, NULL) ? GONE : GIVE_BACK;
		case GB_TRAP_PROGRAM:
			break;
		}
		bool sync = loc.at_insn && eng_sync_fault(st);
		if (sync)
			fix_siginfo(tid, r.rip, loc.pc);
		eng_keep_signal(e, i, st->sig);
		if (back(e, i, &r, &loc, sync ? st : NULL))
			return GONE;
		if (!sync)
			gb_info("trace: thread %d: signal %d in translated code, before 0x%llx", tid,
				st->sig, (unsigned long long)loc.pc);
		return GIVE_BACK;
	}
	/* An interrupt (the end), a group-stop, anything else: back at the
	 * instruction boundary. */
	if (back(e, i, &r, &loc, NULL))
		return GONE;
	if (st->kind == GB_STOP_GROUP) {
		eng_listen(e, i);
		return GONE;
	}
	return GIVE_BACK;
}

/* The owner's run in translated code is over. */
static void run_over(struct gb_engine *e)
{
	struct gb_ejit *x = e->jit;
	x->file_pending = false;
	if (!old_image(e) && x->j) {
		struct gb_jit_stats js;
		gb_jit__stats(x->j, &js);
		e->st.jit_blocks = js.blocks;
	}
}

bool eng_jit_enter(struct gb_engine *e, size_t i)
{
	struct gb_ejit *x = e->jit;
	struct user_regs_struct r;
	if (!x)
		return false;
	old_image(e);
	pid_t tid = eng_tid(e, i);
	if (x->failed || e->t->threads[i].pending_sig || e->range->pending || e->o.faults_cb ||
	    (TRAP_OPS(e)->translate_ok && !TRAP_OPS(e)->translate_ok(e->trap, e, i)) ||
	    e->o.nsnap_pcs || e->o.nsnap_vts || gb_regs_get(tid, &r) ||
	    gb_regs_restarting_syscall(&r) || !eng_in_range(e, r.rip))
		return false;
	if (!x->addr && setup(e, i)) {
		x->failed = true;
		return false;
	}
	if (!x->j || x->range_gen != e->range->gen) {
		gb_jit__free(x->j);
		struct gb_jit_mem m = { x->view, x->view + GB_JIT_CODE_SIZE, x->addr,
					x->addr + GB_JIT_CODE_SIZE };
		struct gb_jit_opts jo = { .values = e->vals != NULL };
		x->j = gb_jit__new_opts(&m, e->range->start, e->range->end, &jo);
		if (!x->j)
			return false;
		x->range_gen = e->range->gen;
		x->epoch = gb_icache__epoch(e->ic);
	}
	revalidate(e);
	uint64_t blk = gb_jit__block(x->j, r.rip, fetch, e);
	if (!blk) {
		const struct gb_insn *in = fetch(e, r.rip);
		if (!in || !gb_jit__supported(in))
			return false; /* stepped */
		gb_jit__flush(x->j); /* out of room */
		if (!(blk = gb_jit__block(x->j, r.rip, fetch, e)))
			return false;
	}
	x->fs_base = r.fs_base;
	x->gs_base = r.gs_base;
	/* --values: a stretch whose thread's registers the trace has not
	 * said yet begins with them (the regs line before its first record) */
	bool synced = eng_th(e, i)->vals_synced;
	x->file_pending = e->vals && !synced;
	if (x->file_pending) {
		x->start = r;
		if (gb_xstate_read(tid, &x->start_xs, &x->start_xcap, &x->start_xlen))
			x->start_xlen = 0;
	}
	r.rip = blk;
	if (gb_regs_set(tid, &r))
		return false;
	e->st.jit_runs++;
	x->at_exit = x->give_back = x->interrupted = false;
	if (!eng_resume(e, i, PTRACE_SYSCALL, 0, T_JIT)) {
		run_over(e);
		return true;
	}
	eng_th(e, i)->vals_synced = synced; /* (in the cache: what the records say) */
	return true;
}

void eng_jit_stop(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	struct gb_ejit *x = e->jit;
	enum after a = on_stop(e, i, st, &x->at_exit, &x->give_back);
	if (a == GIVE_BACK)
		eng_set_state(e, i, T_STOPPED);
	if (a != GO_ON) {
		if (eng_state(e, i) == T_JIT)
			eng_set_state(e, i, T_DYING); /* could not be set: its exit comes */
		run_over(e);
		return;
	}
	eng_check_limits(e, ++x->iter);
	if (e->ended && !x->at_exit && !x->interrupted) {
		ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0);
		x->interrupted = true;
	}
	bool synced = eng_th(e, i)->vals_synced;
	if (!eng_resume(e, i, PTRACE_SYSCALL, 0, T_JIT))
		run_over(e);
	else
		eng_th(e, i)->vals_synced = synced; /* (on in the cache) */
}

void eng_jit_tick(struct gb_engine *e, size_t i)
{
	struct gb_ejit *x = e->jit;
	if (e->ended && !x->interrupted) {
		ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0);
		x->interrupted = true;
	}
}
