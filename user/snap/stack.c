/* Stack traces unwound from the snapshot itself, by the one libdwfl
 * unwinder (user/unwind/unwind.h) given the snapshot as an image: its maps
 * report the modules (their files are opened from disk), its registers seed
 * each thread, and its memory answers every read.  CFI-based unwinding works
 * without frame pointers, and the same code serves a live capture or a
 * loaded file. */
#include "snap/snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "unwind/unwind.h"

#define MAX_FRAMES 256

struct unwind {
	struct gb_snapshot *s;
	struct gb_unwinder *u;
	pid_t pid;
	struct gb_snap_thread *cur;  /* thread being unwound */
	size_t cap;
};

static pid_t tid_of(const struct gb_snapshot *s, size_t i)
{
	return s->threads[i].tid > 0 ? s->threads[i].tid : (pid_t)(i + 1);
}

static bool memory_read(void *ctx, uint64_t addr, uint64_t *word)
{
	const struct gb_snapshot *s = ctx;
	return gb_snapshot_read_memory(s, addr, word, sizeof(*word), NULL) == 0;
}

/* "sym+0xOFF" (the ELF's name), else "module+0xOFF" (from the module's
 * start), else NULL; *function: "func+0xOFF" (demangled), else NULL. */
static char *symbolize(struct unwind *w, uint64_t pc, bool activation, char **function)
{
	struct gb_frame_info fi;
	char *out = NULL;

	*function = NULL;
	if (gb_unwinder__symbol(w->u, w->pid, pc, !activation, &fi))
		return NULL;
	if (fi.sym) {
		if (asprintf(&out, "%s+0x%" PRIx64, fi.sym, fi.func_off) < 0)
			out = NULL;
		if (fi.func && asprintf(function, "%s+0x%" PRIx64, fi.func, fi.func_off) < 0)
			*function = NULL;
	} else if (fi.module) {
		const char *base = strrchr(fi.module, '/');
		if (asprintf(&out, "%s+0x%" PRIx64, base ? base + 1 : fi.module, pc - fi.mod_start) < 0)
			out = NULL;
	}
	return out;
}

static bool on_frame(void *ctx, const struct gb_unwind_frame *fr)
{
	struct unwind *w = ctx;
	struct gb_snap_thread *t = w->cur;

	if (GB_GROW(&t->frames, &w->cap, t->nframes + 1))
		return false;
	struct gb_snap_frame *f = &t->frames[t->nframes++];
	f->pc = fr->pc;
	f->sp = fr->sp;
	f->symbol = symbolize(w, fr->pc, fr->activation, &f->function);
	return t->nframes < MAX_FRAMES && fr->pc != 0;
}

/* The snapshot's maps as /proc/PID/maps text (file-backed maps only). */
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

/* user_regs_struct (ptrace) -> the pt_regs layout the unwinder takes. */
static void to_user_regs(const struct user_regs_struct *r, struct gb_user_regs *g)
{
	*g = (struct gb_user_regs){
		.r15 = r->r15, .r14 = r->r14, .r13 = r->r13, .r12 = r->r12, .bp = r->rbp,
		.bx = r->rbx, .r11 = r->r11, .r10 = r->r10, .r9 = r->r9, .r8 = r->r8,
		.ax = r->rax, .cx = r->rcx, .dx = r->rdx, .si = r->rsi, .di = r->rdi,
		.orig_ax = r->orig_rax, .ip = r->rip, .cs = r->cs, .flags = r->eflags,
		.sp = r->rsp, .ss = r->ss,
	};
}

void gb_snapshot_unwind(struct gb_snapshot *s)
{
	struct unwind w = { .s = s, .pid = s->meta.pid > 0 ? s->meta.pid : 1 };
	size_t len = 0;
	s->unwound = true;
	char *text = maps_text(s, &len);
	w.u = text ? gb_unwinder__new() : NULL;
	if (!w.u || gb_unwinder__add_image(w.u, w.pid, text, len, memory_read, s))
		goto cleanup;
	for (size_t i = 0; i < s->nthreads; i++) {
		struct gb_snap_thread *t = &s->threads[i];
		struct gb_user_regs regs;
		for (size_t j = 0; j < t->nframes; j++) {
			free(t->frames[j].symbol);
			free(t->frames[j].function);
		}
		free(t->frames);
		t->frames = NULL;
		t->nframes = 0;
		w.cur = t;
		w.cap = 0;
		to_user_regs(&t->regs, &regs);
		gb_unwinder__walk(w.u, w.pid, tid_of(s, i), &regs, on_frame, &w);
	}
cleanup:
	gb_unwinder__free(w.u);
	free(text);
}
