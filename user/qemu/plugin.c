/* gebpf's QEMU TCG plugin: the trace lines of docs/trace-format.md from
 * QEMU user mode, for comparing an emulated run with gebpf's native trace
 * (docs/qemu.md).  Built as .output/gebpf-qemu.so beside gebpf; `gebpf qemu`
 * runs qemu-x86_64 with it.  Knobs: user/qemu/knobs.h; output: sink.h.
 *
 * Every vCPU (QEMU user mode: one per guest thread, their callbacks running
 * concurrently on as many host threads).  Each vCPU keeps its current
 * instruction (pc and accesses, inline per-vCPU state, no allocation per
 * instruction) and hands it to the sink, under one lock, when its next
 * in-range instruction starts, when it exits, or at the end: the exec line
 * of an instruction is followed by its own accesses, each vCPU's
 * instructions come in its own order, and vt numbers them in the order
 * they were handed over.  `vcpu` is QEMU's vCPU index.
 *
 * QEMU's plugin API has no context pointer for translation callbacks, so
 * the plugin's state is one static struct (QEMU loads a plugin once per
 * -plugin).
 *
 * values=on (built with -DGB_QEMU_VALUES against QEMU 9.2's or a later
 * qemu-plugin.h: gebpf-qemu10.so; docs/qemu.md "QEMU 10"): the exec
 * callbacks read registers (QEMU_PLUGIN_CB_R_REGS).  A held instruction's
 * written registers (values.h) are read where the vCPU goes on: at its
 * next in-range instruction, or at the first instruction of a stretch
 * outside the range, through a callback that runs only while an
 * instruction is held (a condition on a per-vCPU scoreboard entry).  A
 * syscall is handed over at QEMU's syscall callback with the rcx and r11
 * its own exec callback read (QEMU user mode leaves them as they were).  A
 * regs line goes before a vCPU's first instruction of each stretch: its
 * first, and the next after code outside the range ran (an inline store
 * marks it), after a syscall, a signal or an instruction that loads the
 * whole file. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qemu-plugin.h>

#include "qemu/guest.h"
#include "qemu/knobs.h"
#include "qemu/sink.h"
#ifdef GB_QEMU_VALUES
#include "qemu/values.h"
#endif

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define INLINE_ACC 32          /* accesses kept inline; more grow a heap array */
#define OUT_FD_MIN 900         /* the trace's fd sits above the guest's (see below) */

struct vcpu {
	unsigned index;
	bool pending;                  /* an instruction is held (pc, acc) */
	uint64_t pc;
	uint32_t nacc, cap;
	struct gb_qacc *acc;           /* inl, or a heap array once grown */
	struct gb_qacc inl[INLINE_ACC];
#ifdef GB_QEMU_VALUES
	const struct gb_qinsn *insn;   /* values=on: the held instruction's decoding */
	bool synced;                   /* the lines so far give its registers */
	bool has_file;                 /* a regs line (file) goes before it */
	struct gb_qtext file, regs;    /* that line's registers; the exec line's */
	struct gb_qtext sys;           /* a syscall's rcx and r11 */
	GByteArray *buf;               /* register reads */
	struct gb_qknown known;        /* what its lines said of its registers */
#endif
};

#ifdef GB_QEMU_VALUES
struct sb_entry {                  /* per vCPU, in a QEMU scoreboard */
	uint64_t pending;              /* an instruction is held */
	uint64_t left;                 /* code outside the range ran */
};
#endif

static struct {
	pthread_mutex_t lock;          /* the sink, the vCPU table, resolution, done */
	struct gb_qknobs k;
	struct gb_qsink *sink;
	const char *out_name;
	bool resolved;                 /* lo..hi is the range */
	uint64_t lo, hi;
	bool done;                     /* the summary is written: nothing more */
	struct vcpu **vcpus;           /* by index */
	size_t nvcpus;
#ifdef GB_QEMU_VALUES
	struct qemu_plugin_scoreboard *sb;   /* struct sb_entry */
	qemu_plugin_u64 sb_pending, sb_left;
#endif
} P = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread struct vcpu *me;   /* this host thread's vCPU (user mode: one) */

static void say(const char *what, const char *why)
{
	fprintf(stderr, "gebpf: qemu plugin: %s: %s\n", what, why);
}

/* The vCPU state of index idx (created on first use).  Under P.lock. */
static struct vcpu *vcpu_locked(unsigned idx)
{
	if (idx >= P.nvcpus) {
		size_t n = P.nvcpus ? P.nvcpus : 8;
		while (n <= idx)
			n *= 2;
		struct vcpu **t = realloc(P.vcpus, n * sizeof(*t));
		if (!t)
			return NULL;
		memset(t + P.nvcpus, 0, (n - P.nvcpus) * sizeof(*t));
		P.vcpus = t;
		P.nvcpus = n;
	}
	if (!P.vcpus[idx]) {
		struct vcpu *v = calloc(1, sizeof(*v));
		if (!v)
			return NULL;
		v->index = idx;
		v->acc = v->inl;
		v->cap = INLINE_ACC;
		P.vcpus[idx] = v;
	}
	return P.vcpus[idx];
}

static void no_memory(void)
{
	say("vCPU state", strerror(ENOMEM));
	_exit(1);
}

#ifdef GB_QEMU_VALUES
static void finish(struct vcpu *v, uint64_t next, bool can_read);
#endif

static void commit(struct vcpu *v)
{
#ifdef GB_QEMU_VALUES
	if (P.k.values) {
		finish(v, 0, false);   /* (no register read here) */
		return;
	}
#endif
	gb_qsink__insn(P.sink, v->index, v->pc, v->acc, v->nacc);
	v->pending = false;
}

/* This thread's vCPU (idx), under P.lock. */
static inline struct vcpu *vcpu_me(unsigned idx)
{
	struct vcpu *v = me;
	if (__builtin_expect(!v || v->index != idx, 0)) {
		v = vcpu_locked(idx);
		if (!v) {
			pthread_mutex_unlock(&P.lock);
			no_memory();
		}
		me = v;
	}
	return v;
}

static void on_exec(unsigned int idx, void *udata)
{
	pthread_mutex_lock(&P.lock);
	struct vcpu *v = vcpu_me(idx);
	if (v->pending && !P.done)
		commit(v);
	v->pending = !P.done;
	v->pc = (uint64_t)(uintptr_t)udata;
	v->nacc = 0;
	pthread_mutex_unlock(&P.lock);
}

static void on_mem(unsigned int idx, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	struct vcpu *v = me;
	(void)udata;
	if (!v || v->index != idx || !v->pending)
		return;
	if (__builtin_expect(v->nacc == v->cap, 0)) {
		uint32_t cap = v->cap * 2;
		struct gb_qacc *a = malloc(cap * sizeof(*a));
		if (!a)
			no_memory();
		memcpy(a, v->acc, v->nacc * sizeof(*a));
		if (v->acc != v->inl)
			free(v->acc);
		v->acc = a;
		v->cap = cap;
	}
	struct gb_qacc *a = &v->acc[v->nacc];
	a->addr = vaddr;
	a->size = 1u << qemu_plugin_mem_size_shift(info);
	a->write = qemu_plugin_mem_is_store(info);
#ifdef GB_QEMU_VALUES
	if (P.k.values)
		a->has_val = gb_qvals_mem(info, a->size, a->val);
#endif
	v->nacc++;
}

/* A symbol range, once QEMU has loaded the guest (the first translation:
 * no guest instruction has run yet).  A symbol that does not resolve ends
 * QEMU here with the one error line. */
static void resolve(void)
{
	const struct gb_qknobs *k = &P.k;
	char err[512];
	P.resolved = true;
	if (!k->symbol) {
		P.lo = k->has_start ? k->start : 0;
		P.hi = k->has_end ? k->end : UINT64_MAX;
		return;
	}
	const char *path = qemu_plugin_path_to_binary();
	struct gb_qguest_load load = { qemu_plugin_entry_code(), qemu_plugin_start_code() };
	char what[300];
	snprintf(what, sizeof(what), "range=%s%s%s", k->module ? k->module : "",
		 k->module ? ":" : "", k->symbol);
	if (!path) {
		say(what, "QEMU does not name the guest binary (system emulation?)");
		_exit(1);
	}
	if (gb_qguest_symbol(path, &load, k->module, k->symbol, &P.lo, &P.hi, err, sizeof(err))) {
		say(what, err);
		_exit(1);
	}
	gb_qsink__set_range(P.sink, true, P.lo, true, P.hi);
}

/* The vCPU left the range: its held instruction is complete.  QEMU 7.2
 * keeps an instruction's memory callbacks armed after it ends when it
 * ends its block, and calls them for the accesses that later
 * helper-emulated instructions make (xsave/xrstor in ld.so's lazy binding
 * after a `ret`): they would land on the held instruction.  A callback on
 * the first instruction of each stretch outside the range closes it
 * first (docs/qemu.md "QEMU 7.2"). */
static void on_leave(unsigned int idx, void *udata)
{
	struct vcpu *v = me;
	(void)udata;
	if (!v || v->index != idx || !v->pending)
		return;
	pthread_mutex_lock(&P.lock);
	if (v->pending && !P.done)
		commit(v);
	pthread_mutex_unlock(&P.lock);
}

#ifdef GB_QEMU_VALUES
/* Does the instruction that runs at next follow the held one directly?
 * Else a signal came between (one it raised, or one delivered after it):
 * what it wrote is not known. */
static bool follows(const struct vcpu *v, const struct gb_qinsn *q, uint64_t next)
{
	uint64_t fall = q->pc + q->len;
	switch (q->next) {
	case GB_QNEXT_FALL: return next == fall;
	case GB_QNEXT_REP: return next == fall || next == q->pc;
	case GB_QNEXT_DIRECT: return next == fall || next == q->target;
	case GB_QNEXT_RAISES: return false;
	case GB_QNEXT_MEMVAL:
		for (uint32_t k = 0; k < v->nacc; k++)
			if (!v->acc[k].write && v->acc[k].has_val) {
				uint64_t to;
				memcpy(&to, v->acc[k].val, 8);
				return next == to;
			}
		return true;
	default: return true;
	}
}

static void need(bool ok)
{
	if (!ok) {
		pthread_mutex_unlock(&P.lock);
		no_memory();
	}
}

/* Hand the held instruction over with its values; next: the pc that runs
 * now, can_read: in an R_REGS callback of its vCPU (its registers are the
 * ones after the instruction).  Under P.lock. */
static void finish(struct vcpu *v, uint64_t next, bool can_read)
{
	const struct gb_qinsn *q = v->insn;
	const char *regs = "{}";
	if (q->syscall) {
		regs = v->sys.s;
		v->synced = false;   /* rax: the regs line before the next one */
		gb_qvals_forget(&v->known, &(struct gb_wreg){ GB_WR_GPR, GB_REG_RAX });
	} else if (q->writes_all || !can_read || !follows(v, q, next)) {
		v->synced = false;
	} else {
		need(gb_qvals_regs(&v->regs, v->buf, q->w, q->nw, &v->known));
		regs = v->regs.s;
	}
	gb_qsink__insn_vals(P.sink, v->index, v->pc, v->has_file ? v->file.s : NULL, regs,
			    v->acc, v->nacc);
	v->pending = false;
	qemu_plugin_u64_set(P.sb_pending, v->index, 0);
}

static void on_exec_vals(unsigned int idx, void *udata)
{
	const struct gb_qinsn *q = udata;
	pthread_mutex_lock(&P.lock);
	struct vcpu *v = vcpu_me(idx);
	if (P.done) {
		pthread_mutex_unlock(&P.lock);
		return;
	}
	if (!v->buf) {
		need((v->buf = g_byte_array_new()) != NULL);
		gb_qvals_registers(); /* (done at its init; a vCPU QEMU made before) */
	}
	if (v->pending)
		finish(v, q->pc, true);
	if (qemu_plugin_u64_get(P.sb_left, idx)) {
		qemu_plugin_u64_set(P.sb_left, idx, 0);
		v->synced = false;
	}
	/* the registers as they are before it (after the last one) that
	 * differ from what the vCPU's lines said: none, no line */
	v->has_file = false;
	if (!v->synced) {
		need(gb_qvals_file(&v->file, v->buf, q->pc, &v->known));
		v->has_file = v->file.len > 2;
	}
	v->synced = true;
	if (q->syscall)
		need(gb_qvals_regs(&v->sys, v->buf, q->w, q->nw, &v->known));
	v->pending = true;
	qemu_plugin_u64_set(P.sb_pending, idx, 1);
	v->insn = q;
	v->pc = q->pc;
	v->nacc = 0;
	pthread_mutex_unlock(&P.lock);
}

/* The first instruction of a stretch outside the range, while an
 * instruction is held (the scoreboard's condition). */
static void on_leave_vals(unsigned int idx, void *udata)
{
	pthread_mutex_lock(&P.lock);
	struct vcpu *v = vcpu_me(idx);
	if (v->pending && !P.done)
		finish(v, (uint64_t)(uintptr_t)udata, true);
	v->synced = false;
	pthread_mutex_unlock(&P.lock);
}

/* A syscall (QEMU's callback, before it runs): the held syscall is done. */
static void on_syscall(qemu_plugin_id_t id, unsigned int idx, int64_t num, uint64_t a1,
		       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
		       uint64_t a7, uint64_t a8)
{
	(void)id, (void)num, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6;
	(void)a7, (void)a8;
	pthread_mutex_lock(&P.lock);
	struct vcpu *v = vcpu_me(idx);
	if (v->pending && !P.done)
		finish(v, 0, false);
	v->synced = false;
	pthread_mutex_unlock(&P.lock);
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int idx)
{
	(void)id, (void)idx;
	gb_qvals_registers();
}

/* values=on's callbacks on one instruction of a block. */
static void tb_insn_vals(struct qemu_plugin_insn *insn, uint64_t pc, bool in, bool first_out)
{
	if (!in) {
		if (first_out) {
			qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
				insn, QEMU_PLUGIN_INLINE_STORE_U64, P.sb_left, 1);
			qemu_plugin_register_vcpu_insn_exec_cond_cb(
				insn, on_leave_vals, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_COND_NE,
				P.sb_pending, 0, (void *)(uintptr_t)pc);
		}
		return;
	}
	uint8_t bytes[GB_INSN_MAX_LEN];
	size_t n = qemu_plugin_insn_data(insn, bytes, sizeof(bytes));
	const struct gb_qinsn *q = gb_qvals_insn(pc, bytes, n);
	if (!q)
		no_memory();
	qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec_vals, QEMU_PLUGIN_CB_R_REGS,
					       (void *)q);
	qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
					 (void *)q);
}
#endif

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	if (__builtin_expect(!P.resolved, 0)) {
		pthread_mutex_lock(&P.lock);
		if (!P.resolved)
			resolve();
		pthread_mutex_unlock(&P.lock);
	}
	size_t n = qemu_plugin_tb_n_insns(tb);
	bool prev_in = false;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		bool in = pc >= P.lo && pc <= P.hi;
#ifdef GB_QEMU_VALUES
		if (P.k.values) {
			tb_insn_vals(insn, pc, in, !in && (i == 0 || prev_in));
			prev_in = in;
			continue;
		}
#endif
		if (!in) {
			if (i == 0 || prev_in)
				qemu_plugin_register_vcpu_insn_exec_cb(insn, on_leave,
								       QEMU_PLUGIN_CB_NO_REGS, NULL);
			prev_in = false;
			continue;
		}
		prev_in = true;
		void *u = (void *)(uintptr_t)pc;
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS, u);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, u);
	}
}

/* A guest thread ended: its last instruction is complete. */
static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int idx)
{
	(void)id;
	pthread_mutex_lock(&P.lock);
	if (idx < P.nvcpus && P.vcpus[idx] && P.vcpus[idx]->pending && !P.done)
		commit(P.vcpus[idx]);
#ifdef GB_QEMU_VALUES
	/* (QEMU gives the index to the next thread: its first regs line is
	 * its whole file, as gebpf's first line of a thread) */
	if (idx < P.nvcpus && P.vcpus[idx]) {
		memset(&P.vcpus[idx]->known, 0, sizeof(P.vcpus[idx]->known));
		P.vcpus[idx]->synced = false;
	}
#endif
	pthread_mutex_unlock(&P.lock);
}

/* The guest exited (exit_group, or a fatal signal): the instructions still
 * held, by vCPU index, then the summary. */
static void on_guest_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	pthread_mutex_lock(&P.lock);
	if (!P.done) {
		for (size_t i = 0; i < P.nvcpus; i++)
			if (P.vcpus[i] && P.vcpus[i]->pending)
				commit(P.vcpus[i]);
		P.done = true;
		int err = gb_qsink__finish(P.sink);
		if (err) {
			struct gb_qsink_counts c;
			char why[160];
			gb_qsink__counts(P.sink, &c);
			snprintf(why, sizeof(why), "writing the trace failed: %s: %llu lines dropped",
				 strerror(-err), (unsigned long long)c.dropped);
			say(P.out_name, why);
		}
	}
	pthread_mutex_unlock(&P.lock);
}

/* The trace file, or stdout.  The plugin's descriptor is moved above the
 * guest's usual ones: QEMU user mode shares the fd table with the guest,
 * and a low fd would shift the numbers the guest's own open() returns. */
static int open_out(const char *path)
{
	int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
		      : fcntl(1, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, OUT_FD_MIN);
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	return fd;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	char err[512];
	if (info->system_emulation) {
		say("QEMU system emulation", "the plugin traces QEMU user mode (qemu-x86_64) only");
		return -1;
	}
	if (gb_qknobs_parse(&P.k, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "gebpf: qemu plugin: %s\n", err);
		return -1;
	}
	P.out_name = P.k.out ? P.k.out : "stdout";
	int fd = open_out(P.k.out);
	if (fd < 0) {
		say(P.out_name, strerror(errno));
		return -1;
	}
	struct gb_qsink_opts so = { .exec = P.k.exec, .max_events = P.k.max_events,
				    .zstd = gb_qknobs_zstd(P.k.out) };
	P.sink = gb_qsink__new(fd, &so);
	if (!P.sink) {
		say(P.out_name, strerror(errno));
		close(fd);
		return -1;
	}
	if (!P.k.symbol)
		gb_qsink__set_range(P.sink, P.k.has_start, P.k.start, P.k.has_end, P.k.end);
#ifdef GB_QEMU_VALUES
	if (P.k.values) {
		P.sb = qemu_plugin_scoreboard_new(sizeof(struct sb_entry));
		P.sb_pending = qemu_plugin_scoreboard_u64_in_struct(P.sb, struct sb_entry, pending);
		P.sb_left = qemu_plugin_scoreboard_u64_in_struct(P.sb, struct sb_entry, left);
		qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
		qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
	}
#endif
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
	qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
	qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
	return 0;
}
