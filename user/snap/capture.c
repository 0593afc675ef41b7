/* Capture: a stopped gb_tracee -> struct gb_snapshot.
 *
 * Registers (general, FXSAVE, XSAVE), the stop's siginfo, signal masks per
 * thread; the maps; the bytes of every readable map; exe, auxv, fds, psinfo;
 * then stack traces unwound from the snapshot itself (stack.c).
 *
 * Memory is read with process_vm_readv over large iovecs (one per run of
 * pages), into private anonymous buffers that are never touched where the
 * target has no page: for anonymous maps /proc/PID/pagemap says which pages
 * exist (present or swapped), and absent pages read as zero without being
 * faulted in in the target.  Pages process_vm_readv cannot read are retried
 * through /proc/PID/mem; what neither can read stays zero.  A map of which no
 * page can be read ([vvar], [vsyscall], PROT_NONE) is kept with no bytes.
 */
#include "snap/snapshot.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ptrace/maps.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "snap/proc.h"

#define PAGE GB_SNAP_PAGE
#define MAX_IOV 1024
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)

struct reader {
	pid_t pid;
	int mem_fd, pagemap_fd;
	uint64_t pages_read, pages_failed;
};

struct run {
	uint64_t off, len;      /* within the map */
};

/* Advance the cursor (run i, bytes skip into it) by n bytes. */
static void advance(const struct run *runs, size_t nruns, size_t *i, uint64_t *skip, uint64_t n)
{
	while (*i < nruns && n >= runs[*i].len - *skip) {
		n -= runs[*i].len - *skip;
		(*i)++;
		*skip = 0;
	}
	if (*i < nruns)
		*skip += n;
}

/* Read runs of one map into buf; pages that cannot be read stay zero.
 * Returns pages read (>= 0) or -errno (-ESRCH when the process is gone). */
static int64_t read_runs(struct reader *rd, const struct gb_snap_map *m, uint8_t *buf,
			 const struct run *runs, size_t nruns)
{
	int64_t got = 0;
	size_t i = 0;
	uint64_t skip = 0;
	while (i < nruns) {
		struct iovec lv[MAX_IOV], rv[MAX_IOV];
		size_t n = 0;
		uint64_t total = 0;
		for (size_t j = i; j < nruns && n < MAX_IOV; j++, n++) {
			uint64_t o = runs[j].off + (j == i ? skip : 0);
			uint64_t l = runs[j].len - (j == i ? skip : 0);
			lv[n] = (struct iovec){ buf + o, l };
			rv[n] = (struct iovec){ (void *)(uintptr_t)(m->start + o), l };
			total += l;
		}
		ssize_t r = process_vm_readv(rd->pid, lv, n, rv, n, 0);
		if (r < 0 && errno == ESRCH)
			return -ESRCH;
		uint64_t done = r > 0 ? (uint64_t)r & ~(PAGE - 1) : 0;
		got += (int64_t)(done / PAGE);
		advance(runs, nruns, &i, &skip, done);
		if (i == nruns || done == total)
			continue;
		/* The page at the cursor cannot be read this way. */
		uint64_t o = runs[i].off + skip;
		ssize_t p = rd->mem_fd >= 0 ? pread(rd->mem_fd, buf + o, PAGE, (off_t)(m->start + o)) : -1;
		if (p == (ssize_t)PAGE) {
			got++;
		} else {
			memset(buf + o, 0, PAGE);
			rd->pages_failed++;
		}
		advance(runs, nruns, &i, &skip, PAGE);
	}
	return got;
}

static bool is_plain_anon(const struct gb_map *pm)
{
	return pm->inode == 0 && (pm->path[0] == 0 || !strcmp(pm->path, "[heap]") ||
				  !strncmp(pm->path, "[stack", 6) || !strncmp(pm->path, "[anon:", 6));
}

/* The runs of pages that exist, from pagemap; NULL + *n = 1 run of the whole
 * map when pagemap is not available. */
static struct run *present_runs(struct reader *rd, const struct gb_snap_map *m, size_t *nruns)
{
	uint64_t npages = (m->end - m->start) / PAGE;
	size_t cap = 16, n = 0;
	struct run *runs = malloc(cap * sizeof(*runs));
	uint64_t ent[4096], chunk = sizeof(ent) / sizeof(ent[0]);
	bool in_run = false;
	if (!runs)
		return NULL;
	for (uint64_t p = 0; p < npages; p += chunk) {
		uint64_t k = npages - p < chunk ? npages - p : chunk;
		ssize_t r = pread(rd->pagemap_fd, ent, k * 8, (off_t)((m->start / PAGE + p) * 8));
		if (r != (ssize_t)(k * 8)) {
			free(runs);
			return NULL;
		}
		for (uint64_t q = 0; q < k; q++) {
			bool there = ent[q] & (PM_PRESENT | PM_SWAPPED);
			uint64_t off = (p + q) * PAGE;
			if (there && in_run) {
				runs[n - 1].len += PAGE;
			} else if (there) {
				if (n == cap) {
					cap *= 2;
					struct run *v = realloc(runs, cap * sizeof(*v));
					if (!v) {
						free(runs);
						return NULL;
					}
					runs = v;
				}
				runs[n++] = (struct run){ off, PAGE };
				in_run = true;
			} else {
				in_run = false;
			}
		}
	}
	*nruns = n;
	return runs;
}

static int capture_map(struct reader *rd, const struct gb_map *pm, struct gb_snap_map *m)
{
	uint64_t size = m->end - m->start;
	if (!(pm->prot & PROT_READ) || !strcmp(pm->path, "[vvar]") || !strcmp(pm->path, "[vvar_vclock]"))
		return 0; /* listed, no bytes */
	uint8_t *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			    -1, 0);
	if (buf == MAP_FAILED)
		return -ENOMEM;
	/* Huge pages: on this VM class 4-5x faster to fill than 4 KiB faults. */
	if (size >= (2u << 20))
		madvise(buf, size, MADV_HUGEPAGE);
	struct run whole = { 0, size }, *runs = NULL;
	size_t nruns = 1;
	bool sparse = rd->pagemap_fd >= 0 && is_plain_anon(pm);
	if (sparse)
		runs = present_runs(rd, m, &nruns);
	if (!runs) {
		sparse = false;
		runs = &whole;
		nruns = 1;
	}
	int64_t got = read_runs(rd, m, buf, runs, nruns);
	if (runs != &whole)
		free(runs);
	if (got < 0) {
		munmap(buf, size);
		return (int)got;
	}
	if (got == 0 && !sparse) {
		munmap(buf, size); /* nothing readable: listed with no bytes */
		return 0;
	}
	rd->pages_read += (uint64_t)got;
	m->data = buf;
	return 0;
}

/* The XSAVE area in the standard format that gdb and kernel cores on common
 * hardware use: each component at its architectural offset (AVX 576, MPX
 * 960/1024, AVX-512 1088/1152/1664, PKRU 2688).  Some hypervisors enumerate
 * other offsets in CPUID 0xD (e.g. without MPX's slots); ptrace then hands
 * us that layout, which gdb would misread.  Returns a new buffer or NULL
 * when the layout already is the standard one. */
static const struct { unsigned off, size; } std_xsave[10] = {
	[2] = { 576, 256 }, [3] = { 960, 64 }, [4] = { 1024, 64 }, [5] = { 1088, 64 },
	[6] = { 1152, 512 }, [7] = { 1664, 1024 }, [9] = { 2688, 8 },
};

static uint8_t *xstate_standard(const uint8_t *raw, size_t len, size_t *outlen)
{
	uint64_t xcr0;
	unsigned a, b, c, d;
	if (len < 576)
		return NULL;
	memcpy(&xcr0, raw + 464, 8);
	bool same = true;
	size_t need = 576;
	for (unsigned i = 2; i < 64; i++) {
		if (!(xcr0 & (1ull << i)))
			continue;
		if (i >= 10 || !std_xsave[i].size || !__get_cpuid_count(0xd, i, &a, &b, &c, &d) ||
		    a != std_xsave[i].size)
			return NULL; /* a component we do not know the standard place of */
		if (b != std_xsave[i].off)
			same = false;
		if (std_xsave[i].off + a > need)
			need = std_xsave[i].off + a;
	}
	if (same)
		return NULL;
	uint8_t *std = calloc(1, need);
	if (!std)
		return NULL;
	memcpy(std, raw, 576);
	for (unsigned i = 2; i < 10; i++) {
		if (!(xcr0 & (1ull << i)) || !__get_cpuid_count(0xd, i, &a, &b, &c, &d) || b + a > len)
			continue;
		memcpy(std + std_xsave[i].off, raw + b, a);
	}
	*outlen = need;
	return std;
}

static int capture_thread(pid_t host_pid, const struct gb_thread *th, struct gb_snap_thread *t)
{
	struct gb_proc_status st;
	int r = gb_proc_status(host_pid, th->tid, &st);
	if (r)
		return r;
	t->tid = st.nspid;
	t->sigpend = st.sigpnd | st.shdpnd;
	t->sighold = st.sigblk;
	if ((r = gb_regs_get(th->tid, &t->regs)) || (r = gb_fpregs_get(th->tid, &t->fpregs)))
		return r;
	size_t len = gb_xstate_size();
	if (len < 4096)
		len = 4096;
	len *= 4; /* room for what the kernel's regset exposes beyond XCR0's size */
	t->xstate = calloc(1, len);
	if (!t->xstate)
		return -ENOMEM;
	if (gb_xstate_get(th->tid, t->xstate, &len) == 0) {
		t->xstate_len = len;
		size_t slen;
		uint8_t *std = xstate_standard(t->xstate, len, &slen);
		if (std) {
			free(t->xstate);
			t->xstate = std;
			t->xstate_len = slen;
		}
	} else {
		free(t->xstate);
		t->xstate = NULL;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (ptrace(PTRACE_GETSIGINFO, th->tid, 0, &si) == 0) {
		memcpy(t->siginfo, &si, sizeof(t->siginfo));
		t->cursig = si.si_signo;
	}
	return 0;
}

static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

int gb_snapshot_capture(struct gb_tracee *tr, const struct gb_snap_point *pt,
			struct gb_snapshot **out, char *err, size_t errlen)
{
	struct gb_maps maps = { 0 };
	struct reader rd = { .pid = tr->pid, .mem_fd = -1, .pagemap_fd = -1 };
	struct utsname u;
	char path[64];
	int r;
	*out = NULL;
	struct gb_snapshot *s = gb_snapshot__alloc();
	if (!s)
		return fail(err, errlen, -ENOMEM, "pid %d: out of memory", tr->pid);
	s->owns_map_data = true;
	s->meta.arch = strdup("amd64");
	s->meta.platform = strdup("linux");
	s->meta.kernel = strdup(uname(&u) == 0 ? u.release : "");
	s->meta.point = strdup(pt && pt->point ? pt->point : "attach");
	s->meta.vt = pt ? pt->vt : -1;

	s->threads = calloc(tr->nthreads ? tr->nthreads : 1, sizeof(*s->threads));
	if (!s->threads) {
		r = fail(err, errlen, -ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct gb_thread *th = &tr->threads[i];
		if (th->exited)
			continue;
		if (!th->stopped) {
			r = fail(err, errlen, -EINVAL, "pid %d: thread %d is not stopped", tr->pid, th->tid);
			goto cleanup;
		}
		struct gb_snap_thread *t = &s->threads[s->nthreads++];
		r = capture_thread(tr->pid, th, t);
		if (r) {
			r = fail(err, errlen, r, "pid %d: thread %d: %s", tr->pid, th->tid,
				 r == -ESRCH ? "exited during the capture" : strerror(-r));
			goto cleanup;
		}
		if (pt && pt->tid == th->tid)
			s->meta.tid = t->tid;
	}
	if (!s->nthreads) {
		r = fail(err, errlen, -ESRCH, "pid %d: no live thread to capture", tr->pid);
		goto cleanup;
	}

	r = gb_proc_fill(tr->pid, s);
	if (!r)
		r = gb_maps_read(tr->pid, &maps);
	if (r) {
		r = fail(err, errlen, r, "pid %d: %s", tr->pid,
			 r == -ESRCH ? "the process exited during the capture" : strerror(-r));
		goto cleanup;
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", tr->pid);
	rd.mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", tr->pid);
	rd.pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	s->maps = calloc(maps.n ? maps.n : 1, sizeof(*s->maps));
	if (!s->maps) {
		r = fail(err, errlen, -ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	for (size_t i = 0; i < maps.n; i++) {
		const struct gb_map *pm = &maps.v[i];
		struct gb_snap_map *m = &s->maps[s->nmaps++];
		m->start = pm->start;
		m->end = pm->end;
		m->pgoff = pm->offset;
		m->inode = pm->inode;
		memcpy(m->perms, pm->perms, sizeof(m->perms));
		m->path = strdup(pm->path);
		if (!m->path || (r = capture_map(&rd, pm, m))) {
			r = r ? r : -ENOMEM;
			r = fail(err, errlen, r, "pid %d: reading 0x%" PRIx64 "-0x%" PRIx64 ": %s", tr->pid,
				 pm->start, pm->end,
				 r == -ESRCH ? "the process exited during the capture" : strerror(-r));
			goto cleanup;
		}
	}
	if (rd.pages_failed) {
		char n[32];
		snprintf(n, sizeof(n), "%" PRIu64, rd.pages_failed);
		gb_snapshot_set_var(s, "unreadable_pages", n);
	}
	gb_snapshot__unwind(s);
	*out = s;
	s = NULL;
	r = 0;
cleanup:
	if (rd.mem_fd >= 0)
		close(rd.mem_fd);
	if (rd.pagemap_fd >= 0)
		close(rd.pagemap_fd);
	gb_maps_free(&maps);
	gb_snapshot_free(s);
	return r;
}
