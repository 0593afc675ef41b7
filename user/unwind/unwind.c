/* DWARF unwinding and naming of user stacks (samples and snapshots): unwind.h. */
#include "unwind/unwind.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "sym/debugfile.h"
#include "sym/perfmap.h"
#include "unwind/internal.h"
#include "unwind/mapskeep.h"

int unw_cmp_proc(const void *a, const void *b)
{
	pid_t x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;
	return (x > y) - (x < y);
}

static int cmp_file(const void *a, const void *b)
{
	const struct elf_file *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/* The shared handle of the file at path, mapped by process pid from device
 * dev, inode ino (as /proc/PID/maps gives them).  A file already open is
 * found by its device and inode without a system call.  Otherwise it is
 * opened as pid sees it (/proc/PID/root); when that fails (the process is
 * exiting: its root is gone before its memory), the path as gebpf sees it
 * is used if it is the same file (same device and inode), so that a module
 * of a dying process still has its symbols and build id. */
static struct elf_file *open_file(struct gb_unwinder *u, pid_t pid, const char *path, dev_t dev,
				  ino_t ino)
{
	char full[4200];
	struct stat st;
	struct elf_file key = { .dev = dev, .ino = ino }, *f, **slot;
	int fd;

	if (ino && (slot = tfind(&key, &u->files, cmp_file)))
		return *slot;
	snprintf(full, sizeof(full), "/proc/%d/root%s", pid, path);
	fd = open(full, O_RDONLY | O_CLOEXEC);
	bool ours = fd < 0 && ino;
	if (ours)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || (ours && (st.st_dev != dev || st.st_ino != ino))) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	key.dev = st.st_dev;
	key.ino = st.st_ino;
	slot = tfind(&key, &u->files, cmp_file);
	if (slot) {
		close(fd);
		return *slot;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		return NULL;
	}
	*f = key;
	f->fd = fd;
	f->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || !tsearch(f, &u->files, cmp_file)) {
		elf_end(f->elf);
		close(fd);
		free(f);
		return NULL;
	}
	return f;
}

/* Dwfl_Callbacks.find_elf: the module's userdata is its file, opened when
 * the maps were read (report()), not now: by the time a module's ELF is
 * first needed the process may have exited, and a dead process's
 * /proc/PID/root opens nothing.  The handle returned is a counted
 * reference to the shared one (elf_begin with a reference of the same
 * mode), which libdwfl ends with the module. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct elf_file *f = *userdata;

	(void)mod;
	(void)base;
	*elfp = NULL;
	if (!f)
		return -1;
	*elfp = elf_begin(f->fd, ELF_C_READ_MMAP, f->elf);
	if (*elfp)
		*file_name = strdup(modname);
	return -1;
}

static bool mem_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct proc *p = arg;
	uint64_t sp = p->regs->sp;

	(void)dwfl;
	if (p->image) {
		uint64_t w;
		if (!p->read(p->read_ctx, addr, &w))
			return false;
		*result = w;
		return true;
	}
	if (addr < sp || addr - sp > p->len || p->len - (addr - sp) < sizeof(*result)) {
		p->read_failed = true;
		return false;
	}
	memcpy(result, p->stack + (addr - sp), sizeof(*result));
	return true;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)arg;
	(void)thread_argp;
	return 0;    /* we unwind one thread at a time (dwfl_getthread_frames) */
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct gb_user_regs *r = ((struct proc *)arg)->regs;
	/* x86-64 DWARF register numbers 0-16 (16: the return address column,
	 * rip, as elfutils' own x86_64 initreg sets it). */
	const Dwarf_Word dw[17] = {
		r->ax, r->dx, r->cx, r->bx, r->si, r->di, r->bp, r->sp,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->ip,
	};
	if (!dwfl_thread_state_registers(thread, 0, 17, dw))
		return false;
	dwfl_thread_state_register_pc(thread, r->ip);
	return true;
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = mem_read,
	.set_initial_registers = set_initial_registers,
};

/* Report every file-backed mapping of pid as one module per file (its
 * lowest to highest address), then attach our thread callbacks.  Nothing
 * is redone when the maps are unchanged since the last read. */
static void report_text(struct proc *p, char *text, size_t len, bool live);

/* The keeper's last text of p when newer than the one applied: applied
 * (true), its modules those of the process's last maps while it lived. */
static bool report_kept(struct proc *p)
{
	char *text;
	size_t len;

	/* (one read before ours, of a process since changed, is not newer) */
	if (!p->u->keep ||
	    !gb_mapskeep_newer(p->u->keep, p->pid, p->live_ns, &p->keep_gen, &text, &len))
		return false;
	report_text(p, text, len, false);
	return true;
}

static void report(struct proc *p)
{
	char path[64], line[4400];
	char *text = NULL;
	size_t len = 0;
	FILE *f, *mem;

	p->reported_ns = gb_mono_ns();
	snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
	f = fopen(path, "re");
	if (!f) {
		p->exited = true;
		report_kept(p);  /* reaped: keep what we had, or what the keeper saw */
		return;
	}
	mem = open_memstream(&text, &len);
	if (!mem) {
		fclose(f);
		return;
	}
	while (fgets(line, sizeof(line), f))
		fputs(line, mem);
	fclose(f);
	fclose(mem);
	/* A live process maps at least its executable; empty maps are those
	 * of a process that has released its memory (exiting, or a zombie not
	 * yet reaped).  Its samples still queued were taken with the modules
	 * we know, or those the keeper read last: keep them, never replace
	 * them by none. */
	if (!len) {
		free(text);
		p->exited = true;
		report_kept(p);
		return;
	}
	p->live_ns = p->reported_ns;
	report_text(p, text, len, true);
}

/* Apply TEXT (maps, LEN > 0; freed here): read from /proc now (LIVE: the
 * executable's name read with it) or kept from before. */
static void report_text(struct proc *p, char *text, size_t len, bool live)
{
	char path[64], line[4400], name[4200], last[4200] = "";
	uint64_t lo = 0, hi = 0, h = GB_FNV1A_INIT;
	dev_t last_dev = 0;
	ino_t last_ino = 0;
	FILE *f;

	if (live) {
		char exe[4200];
		ssize_t n;
		snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
		n = readlink(path, exe, sizeof(exe) - 1);
		if (n > 0 && (exe[n] = 0, !p->exe || strcmp(p->exe, exe))) {
			free(p->exe);
			p->exe = strdup(exe);
		}
	}
	h = gb_fnv1a(text, len, h);
	if (p->dwfl && h == p->maps_hash) {
		free(text);
		return;
	}
	if (p->dwfl)
		dwfl_end(p->dwfl);
	p->maps_hash = h;
	p->dwfl = dwfl_begin(&p->u->cbs);
	if (!p->dwfl) {
		free(text);
		return;
	}
	f = fmemopen(text, len ? len : 1, "r");
	dwfl_report_begin(p->dwfl);
	for (;;) {
		uint64_t s = 0, e = 0, ino = 0;
		unsigned maj = 0, min = 0;
		bool more = f && len && fgets(line, sizeof(line), f) != NULL;

		name[0] = 0;
		if (more && sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %x:%x %" SCNu64 " %4199[^\n]",
				   &s, &e, &maj, &min, &ino, name) < 2)
			continue;
		if (name[0] != '/' || strstr(name, " (deleted)"))
			name[0] = 0;
		if (last[0] && (!more || strcmp(name, last))) {
			Dwfl_Module *m = dwfl_report_module(p->dwfl, last, lo, hi);
			void **ud;
			if (m && dwfl_module_info(m, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
				*ud = open_file(p->u, p->pid, last, last_dev, last_ino);
			last[0] = 0;
		}
		if (!more)
			break;
		if (name[0] && !last[0]) {
			snprintf(last, sizeof(last), "%s", name);
			lo = s;
			last_dev = makedev(maj, min);
			last_ino = (ino_t)ino;
		}
		if (name[0])
			hi = e;
	}
	if (f)
		fclose(f);
	free(text);
	dwfl_report_end(p->dwfl, NULL, NULL);
	/* Without it naming still works; unwinding does not. */
	dwfl_attach_state(p->dwfl, NULL, p->pid, &thread_cbs, p);
}

/* Every ELF file of every sampled process stays open (a whole-system run
 * maps many), and libdw opens debug files besides: the open-file limit at
 * its maximum, once the first live process is read (an unwinder of images
 * only leaves it alone). */
static void raise_nofile(struct gb_unwinder *u)
{
	struct rlimit r;

	if (u->nofile_raised)
		return;
	u->nofile_raised = true;
	if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

static struct proc *new_proc(struct gb_unwinder *u, pid_t pid)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->u = u;
	if (!tsearch(p, &u->procs, unw_cmp_proc)) {
		free(p);
		return NULL;
	}
	return p;
}

struct proc *unw_get_proc(struct gb_unwinder *u, pid_t pid)
{
	struct proc key = { .pid = pid }, *p, **slot;

	slot = tfind(&key, &u->procs, unw_cmp_proc);
	if (slot)
		return *slot;
	raise_nofile(u);
	p = new_proc(u, pid);
	if (p)
		report(p);
	return p;
}

/* The module holding addr, reading the maps again when none does and a
 * sample was taken after the last read (a library loaded since): at most
 * once per batch of samples, and never for a pc that was already outside
 * every module when the maps were read.  An image's maps never change. */
Dwfl_Module *unw_module_of(struct proc *p, uint64_t addr)
{
	Dwfl_Module *m = p->dwfl ? dwfl_addrmodule(p->dwfl, addr) : NULL;

	if (!m && !p->image && !p->exited && p->newest_ns > p->reported_ns) {
		report(p);
		m = p->dwfl ? dwfl_addrmodule(p->dwfl, addr) : NULL;
	}
	return m;
}

struct gb_unwinder *gb_unwinder__new(void)
{
	struct gb_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	elf_version(EV_CURRENT);
	u->cbs.find_elf = find_elf;
	u->cbs.find_debuginfo = gb_find_debuginfo;
	u->cbs.debuginfo_path = &u->debuginfo_path;   /* NULL: the default, /usr/lib/debug */
	u->image_cbs = u->cbs;
	u->image_cbs.find_elf = dwfl_linux_proc_find_elf;
	return u;
}

int gb_unwinder__add_image(struct gb_unwinder *u, pid_t pid, const char *maps, size_t len,
			   gb_unwind_read_fn read, void *ctx)
{
	struct proc key = { .pid = pid }, *p;
	FILE *f;
	int r;

	if (tfind(&key, &u->procs, unw_cmp_proc))
		return -EEXIST;
	p = new_proc(u, pid);
	if (!p)
		return -ENOMEM;
	p->image = true;
	p->read = read;
	p->read_ctx = ctx;
	f = fmemopen((void *)maps, len ? len : 1, "r");
	p->dwfl = f ? dwfl_begin(&u->image_cbs) : NULL;
	if (!p->dwfl) {
		if (f)
			fclose(f);
		return -ENOMEM;
	}
	dwfl_report_begin(p->dwfl);
	r = dwfl_linux_proc_maps_report(p->dwfl, f);
	dwfl_report_end(p->dwfl, NULL, NULL);
	fclose(f);
	if (r || !dwfl_attach_state(p->dwfl, NULL, pid, &thread_cbs, p)) {
		dwfl_end(p->dwfl);
		p->dwfl = NULL;
		return -ENOENT;
	}
	return 0;
}

static int on_frame(Dwfl_Frame *f, void *arg)
{
	struct proc *p = arg;
	struct gb_unwind_frame fr = { 0 };
	Dwarf_Word sp;

	if (!dwfl_frame_pc(f, &fr.pc, &fr.activation))
		return DWARF_CB_ABORT;
	if (p->depth++ == 0)
		fr.sp = p->regs->sp;
	else if (dwfl_frame_reg(f, 7, &sp) == 0)
		fr.sp = sp;
	return p->on_frame(p->frame_ctx, &fr) ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* One walk of thread tid of p from regs. 0, or -1 when libdwfl stopped on
 * an error. */
static int walk(struct proc *p, pid_t tid, const struct gb_user_regs *regs, gb_unwind_frame_cb cb,
		void *ctx)
{
	int rc;

	p->regs = regs;
	p->on_frame = cb;
	p->frame_ctx = ctx;
	p->depth = 0;
	p->read_failed = false;
	rc = dwfl_getthread_frames(p->dwfl, tid, on_frame, p);
	p->regs = NULL;
	return rc;
}

int gb_unwinder__walk(struct gb_unwinder *u, pid_t pid, pid_t tid, const struct gb_user_regs *regs,
		      gb_unwind_frame_cb cb, void *ctx)
{
	struct proc key = { .pid = pid }, **slot = tfind(&key, &u->procs, unw_cmp_proc);

	if (!slot || !(*slot)->image || !(*slot)->dwfl)
		return -ENOENT;
	return walk(*slot, tid, regs, cb, ctx) ? -EIO : 0;
}

struct pcs {
	uint64_t *pcs;
	int n, max;
};

static bool put_pc(void *ctx, const struct gb_unwind_frame *f)
{
	struct pcs *c = ctx;

	if (c->n && f->pc == 0)
		return false;
	c->pcs[c->n++] = f->pc;
	return c->n < c->max;
}

int gb_unwinder__unwind(struct gb_unwinder *u, pid_t pid, pid_t tid,
			const struct gb_user_regs *regs, const uint8_t *stack, size_t len,
			uint64_t *pcs, int max, bool *complete)
{
	struct proc *p = unw_get_proc(u, pid);
	struct pcs c = { .pcs = pcs, .max = max };
	int rc;

	*complete = false;
	pcs[0] = regs->ip;
	if (!p || p->image || max < 2)
		return 1;
	unw_module_of(p, regs->ip);
	if (!p->dwfl || dwfl_pid(p->dwfl) != pid)
		return 1;
	p->stack = stack;
	p->len = len;
	rc = walk(p, tid, regs, put_pc, &c);
	/* libdwfl ends a walk without error where a saved return address
	 * could not be read (it looks undefined, as in the outermost frame):
	 * a read outside the copy means the copy was too short. */
	*complete = rc == 0 && !p->read_failed;
	return c.n ? c.n : 1;
}

void gb_unwinder__prepare(struct gb_unwinder *u, pid_t pid)
{
	struct proc *p = unw_get_proc(u, pid);
	if (p)
		p->prepared = true;
	if (p && u->keep)
		gb_mapskeep_watch(u->keep, pid, true, 0);
}

struct refresh {
	uint64_t now, every_ns, active_ns;
	size_t n;
};

static void refresh_one(const void *node, VISIT which, void *arg)
{
	struct proc *p = *(struct proc *const *)node;
	struct refresh *r = arg;

	if ((which != postorder && which != leaf) || p->image || p->exited ||
	    r->now - p->reported_ns < r->every_ns)
		return;
	/* A process known only from samples is read while it has some; one
	 * prepared (a launched command) until it exits. */
	if (!p->prepared && r->now - p->newest_ns > r->active_ns)
		return;
	/* (the keeper reads them: its newest text, if any) */
	if (p->u->keep) {
		p->reported_ns = r->now;
		r->n += report_kept(p);
		return;
	}
	report(p);
	r->n++;
}

size_t gb_unwinder__refresh(struct gb_unwinder *u, uint64_t every_ns, uint64_t active_ns)
{
	struct refresh r = { .now = gb_mono_ns(), .every_ns = every_ns, .active_ns = active_ns };

	twalk_r(u->procs, refresh_one, &r);
	return r.n;
}

void gb_unwinder__sample_time(struct gb_unwinder *u, pid_t pid, uint64_t ns)
{
	struct proc *p = unw_get_proc(u, pid);
	if (p && ns > p->newest_ns)
		p->newest_ns = ns;
	/* (the keeper told every 50 ms of samples, not at each) */
	if (p && u->keep && !p->image && ns > p->watched_ns + 50000000ull) {
		p->watched_ns = ns;
		gb_mapskeep_watch(u->keep, pid, false, ns);
	}
}

int gb_unwinder__keep(struct gb_unwinder *u, uint64_t every_ns, uint64_t active_ns)
{
	if (u->keep)
		return 0;
	u->keep = gb_mapskeep_new(every_ns, active_ns);
	return u->keep ? 0 : -errno;
}

static void free_proc(void *x);

struct forget {
	uint64_t before_ns;
	struct proc **gone;
	size_t n, cap;
};

static void collect_gone(const void *node, VISIT which, void *arg)
{
	struct proc *p = *(struct proc *const *)node;
	struct forget *f = arg;
	char path[32];

	if ((which != postorder && which != leaf) || p->image || p->newest_ns >= f->before_ns)
		return;
	snprintf(path, sizeof(path), "/proc/%d", p->pid);
	if (!access(path, F_OK))
		return;
	if (f->n == f->cap) {
		struct proc **v = realloc(f->gone, (f->cap = f->cap ? 2 * f->cap : 64) * sizeof(*v));
		if (!v)
			return;
		f->gone = v;
	}
	f->gone[f->n++] = p;
}

static void count_one(const void *node, VISIT which, void *arg)
{
	(void)node;
	if (which == postorder || which == leaf)
		++*(size_t *)arg;
}

size_t gb_unwinder__nprocs(const struct gb_unwinder *u)
{
	size_t n = 0;
	twalk_r(u->procs, count_one, &n);
	return n;
}

size_t gb_unwinder__forget(struct gb_unwinder *u, uint64_t before_ns)
{
	struct forget f = { .before_ns = before_ns };

	twalk_r(u->procs, collect_gone, &f);
	for (size_t i = 0; i < f.n; i++) {
		tdelete(f.gone[i], &u->procs, unw_cmp_proc);
		free_proc(f.gone[i]);
	}
	free(f.gone);
	return f.n;
}

static void free_proc(void *x)
{
	struct proc *p = x;
	if (p->u->keep && !p->image)
		gb_mapskeep_forget(p->u->keep, p->pid);
	free(p->exe);
	gb_perfmap__free(p->jit);
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p);
}

static void free_file(void *x)
{
	struct elf_file *f = x;
	elf_end(f->elf);
	close(f->fd);
	free(f);
}

void gb_unwinder__free(struct gb_unwinder *u)
{
	if (!u)
		return;
	gb_mapskeep_free(u->keep);
	u->keep = NULL;   /* (free_proc below: nothing to forget) */
	/* Modules (and their references to the files) first. */
	tdestroy(u->procs, free_proc);
	tdestroy(u->files, free_file);
	free(u->dem);
	free(u);
}
