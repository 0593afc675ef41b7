/* Stack traces unwound from the snapshot itself with elfutils libdwfl: the
 * snapshot's maps report the modules (their files are opened from disk), its
 * registers seed each thread, and its memory answers every read.  CFI-based
 * unwinding works without frame pointers, and the same code serves a live
 * capture or a loaded file. */
#include "snap/snapshot.h"

#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

#define MAX_FRAMES 256

struct unwind {
	struct gb_snapshot *s;
	size_t next;                 /* next_thread cursor */
	Dwfl *dwfl;
	struct gb_snap_thread *cur;  /* thread being unwound */
	size_t cap;
};

static pid_t tid_of(const struct gb_snapshot *s, size_t i)
{
	return s->threads[i].tid > 0 ? s->threads[i].tid : (pid_t)(i + 1);
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwind *u = arg;
	if (u->next >= u->s->nthreads)
		return 0;
	size_t i = u->next++;
	*thread_argp = &u->s->threads[i];
	return tid_of(u->s, i);
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct unwind *u = arg;
	for (size_t i = 0; i < u->s->nthreads; i++)
		if (tid_of(u->s, i) == tid) {
			*thread_argp = &u->s->threads[i];
			return true;
		}
	return false;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwind *u = arg;
	return gb_snapshot_read_memory(u->s, addr, result, sizeof(*result), NULL) == 0;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct user_regs_struct *r = &((struct gb_snap_thread *)thread_arg)->regs;
	/* DWARF numbering on x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip. */
	Dwarf_Word d[17] = { r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp, r->rsp,
			     r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->rip };
	if (!dwfl_thread_state_registers(thread, 0, 17, d))
		return false;
	dwfl_thread_state_register_pc(thread, r->rip);
	return true;
}

static const Dwfl_Thread_Callbacks callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

static char *symbolize(Dwfl *dwfl, Dwarf_Addr pc, bool activation)
{
	/* A return address points after the call: look up the call itself. */
	Dwarf_Addr look = activation ? pc : pc - 1;
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, look);
	char *out = NULL;
	if (!mod)
		return NULL;
	GElf_Off off;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(mod, look, &off, &sym, NULL, NULL, NULL);
	if (name) {
		if (asprintf(&out, "%s+0x%" PRIx64, name, (uint64_t)(off + (pc - look))) < 0)
			out = NULL;
		return out;
	}
	Dwarf_Addr start;
	const char *mname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	if (mname) {
		const char *base = strrchr(mname, '/');
		if (asprintf(&out, "%s+0x%" PRIx64, base ? base + 1 : mname, (uint64_t)(pc - start)) < 0)
			out = NULL;
	}
	return out;
}

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct unwind *u = arg;
	struct gb_snap_thread *t = u->cur;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	if (GB_GROW(&t->frames, &u->cap, t->nframes + 1))
		return DWARF_CB_ABORT;
	struct gb_snap_frame *f = &t->frames[t->nframes++];
	Dwarf_Word sp = 0;
	if (dwfl_frame_reg(state, 7, &sp) != 0)
		sp = 0;
	if (t->nframes == 1)
		sp = t->regs.rsp;
	f->pc = pc;
	f->sp = sp;
	f->symbol = symbolize(u->dwfl, pc, activation);
	return t->nframes >= MAX_FRAMES || pc == 0 ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* The snapshot's maps as /proc/PID/maps text, for dwfl_linux_proc_maps_report. */
static char *maps_text(const struct gb_snapshot *s, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < s->nmaps; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		if (!m->path || m->path[0] != '/')
			continue;
		fprintf(f, "%" PRIx64 "-%" PRIx64 " %s %08" PRIx64 " 00:00 %" PRIu64 " %s\n", m->start, m->end,
			m->perms, m->pgoff, m->inode ? m->inode : 1, m->path);
	}
	fclose(f);
	return text;
}

void gb_snapshot__unwind(struct gb_snapshot *s)
{
	static char *debuginfo_path = NULL;
	static const Dwfl_Callbacks cbs = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.debuginfo_path = &debuginfo_path,
	};
	struct unwind u = { .s = s };
	size_t len = 0;
	s->unwound = true;
	char *text = maps_text(s, &len);
	FILE *f = text ? fmemopen(text, len ? len : 1, "r") : NULL;
	Dwfl *dwfl = dwfl_begin(&cbs);
	if (!f || !dwfl)
		goto cleanup;
	dwfl_report_begin(dwfl);
	int r = dwfl_linux_proc_maps_report(dwfl, f);
	dwfl_report_end(dwfl, NULL, NULL);
	if (r)
		goto cleanup;
	u.dwfl = dwfl;
	pid_t pid = s->meta.pid > 0 ? s->meta.pid : 1;
	if (!dwfl_attach_state(dwfl, NULL, pid, &callbacks, &u))
		goto cleanup;
	for (size_t i = 0; i < s->nthreads; i++) {
		struct gb_snap_thread *t = &s->threads[i];
		for (size_t j = 0; j < t->nframes; j++)
			free(t->frames[j].symbol);
		free(t->frames);
		t->frames = NULL;
		t->nframes = 0;
		u.cur = t;
		u.cap = 0;
		dwfl_getthread_frames(dwfl, tid_of(s, i), on_frame, &u);
	}
cleanup:
	if (dwfl)
		dwfl_end(dwfl);
	if (f)
		fclose(f);
	free(text);
}
