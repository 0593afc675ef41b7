/* Probe trap: the probetrap.bpf.c skeleton and its uprobes behind an opaque
 * type.  API and the engine's contract: probetrap.h.  The program: docs/bpf.md. */
#include "probe/probetrap.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "gebpf_events.h"
#include "probe/counters.h"
#include "probe/features.h"
#include "ptrace/maps.h"
#include "probetrap.skel.h"

#define ORIG_MAX 16

struct probe {
	char *path;                  /* as given */
	char *real;                  /* realpath (matched against /proc/PID/maps) */
	dev_t dev;
	ino_t ino;
	uint64_t off;
	uint8_t orig;                /* the file's byte at off (the int3 replaces it) */
	struct bpf_link *link;
};

/* A probe's runtime address in the current address space. */
struct rt {
	uint64_t addr;
	uint8_t orig;
};

/* The pending-signal counts of one thread (pt_pending's value). */
struct pending {
	uint32_t sig, stop;
};

struct gb_probetrap {
	struct probetrap_bpf *skel;
	struct ring_buffer *rb;
	pid_t tgid;
	int signo;
	struct probe *pr;
	size_t npr, capr;
	struct rt *rt;               /* sorted by addr; valid while rt_valid */
	size_t nrt;
	bool rt_valid;
	struct gb_ev_probe *q;       /* drained records not yet claimed, oldest first */
	size_t nq, capq;
	uint64_t claimed;
	bool nofile_raised;
};

static void say(const struct gb_probetrap_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(const struct gb_probetrap_opts *o, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (o->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	gb_warn("probe trap: pid %d: %s", (int)o->tgid, buf);
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct gb_probetrap *p = ctx;
	const struct gb_ev_probe *e = data;

	if (len < sizeof(*e) || e->h.kind != GB_EV_PROBE)
		return 0;
	if (p->nq == p->capq) {
		size_t cap = p->capq ? 2 * p->capq : 16;
		struct gb_ev_probe *q = realloc(p->q, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		p->q = q;
		p->capq = cap;
	}
	p->q[p->nq++] = *e;
	return 0;
}

struct gb_probetrap *gb_probetrap__new(const struct gb_probetrap_opts *o)
{
	struct gb_probetrap *p = NULL;
	int err;

	if (o->tgid <= 0 || o->signo < 0 || o->signo >= 65 || o->signo == SIGKILL) {
		say(o, "bad process or signal %d", o->signo);
		return NULL;
	}
	gb_probe_libbpf_init();
	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0 &&
	    access("/sys/kernel/tracing/uprobe_events", W_OK) != 0 &&
	    access("/sys/kernel/debug/tracing/uprobe_events", W_OK) != 0) {
		say(o, "uprobes are not available (no uprobe PMU, no tracefs uprobe_events)");
		return NULL;
	}
	if (!gb_feat_kernel_btf()) {
		say(o, "no BTF: the kernel lacks /sys/kernel/btf/vmlinux (CO-RE needs it)");
		return NULL;
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_send_signal_thread, NULL) != 1) {
		say(o, "the kernel lacks bpf_send_signal_thread (Linux 5.5)%s",
		    geteuid() ? " or this is not root" : "");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		say(o, "%s", strerror(ENOMEM));
		return NULL;
	}
	p->tgid = o->tgid;
	p->signo = o->signo ? o->signo : SIGURG;
	p->skel = probetrap_bpf__open();
	if (!p->skel) {
		say(o, "opening BPF object: %s", strerror(errno));
		goto fail;
	}
	p->skel->rodata->tgid = (__u32)o->tgid;
	p->skel->rodata->signo = (__u32)p->signo;
	err = probetrap_bpf__load(p->skel);
	if (err) {
		say(o, "loading the uprobe program: %s%s", strerror(-err),
		    err == -EPERM ? " (needs root: CAP_BPF and CAP_PERFMON)" : "");
		goto fail;
	}
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.pt_events), on_record, p, NULL);
	if (!p->rb) {
		say(o, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	return p;
fail:
	gb_probetrap__free(p);
	return NULL;
}

static struct probe *find_probe(struct gb_probetrap *p, dev_t dev, ino_t ino, uint64_t off)
{
	for (size_t i = 0; i < p->npr; i++)
		if (p->pr[i].ino == ino && p->pr[i].dev == dev && p->pr[i].off == off)
			return &p->pr[i];
	return NULL;
}

static struct bpf_link *attach(struct gb_probetrap *p, const char *path, uint64_t off)
{
	struct bpf_link *l = bpf_program__attach_uprobe(p->skel->progs.gb_probe_hit, false,
							p->tgid, path, (size_t)off);
	struct rlimit r;

	/* One perf-event descriptor per probe: hundreds exceed the usual soft
	 * limit of 1024 descriptors. */
	if (!l && errno == EMFILE && !p->nofile_raised && getrlimit(RLIMIT_NOFILE, &r) == 0 &&
	    r.rlim_cur < r.rlim_max) {
		p->nofile_raised = true;
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r) == 0)
			l = bpf_program__attach_uprobe(p->skel->progs.gb_probe_hit, false, p->tgid,
						       path, (size_t)off);
	}
	return l;
}

int gb_probetrap__add(struct gb_probetrap *p, const char *path, uint64_t file_offset)
{
	struct probe pr = { .off = file_offset };
	char real[PATH_MAX];
	struct stat st;
	int fd, err;

	if (!p || !path)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || pread(fd, &pr.orig, 1, (off_t)file_offset) != 1) {
		err = errno ? -errno : -EINVAL;
		close(fd);
		return err;
	}
	close(fd);
	if (find_probe(p, st.st_dev, st.st_ino, file_offset))
		return -EEXIST;
	pr.dev = st.st_dev;
	pr.ino = st.st_ino;
	pr.path = strdup(path);
	pr.real = realpath(path, real) ? strdup(real) : strdup(path);
	if (!pr.path || !pr.real) {
		err = -ENOMEM;
		goto fail;
	}
	if (p->npr == p->capr) {
		size_t cap = p->capr ? 2 * p->capr : 16;
		struct probe *v = realloc(p->pr, cap * sizeof(*v));
		if (!v) {
			err = -ENOMEM;
			goto fail;
		}
		p->pr = v;
		p->capr = cap;
	}
	pr.link = attach(p, path, file_offset);
	if (!pr.link) {
		err = errno ? -errno : -EINVAL;
		goto fail;
	}
	p->pr[p->npr++] = pr;
	p->rt_valid = false;
	return 0;
fail:
	free(pr.path);
	free(pr.real);
	return err;
}

int gb_probetrap__remove(struct gb_probetrap *p, const char *path, uint64_t file_offset)
{
	struct probe *pr;
	struct stat st;

	if (!p || !path)
		return -EINVAL;
	if (stat(path, &st) != 0)
		return -errno;
	pr = find_probe(p, st.st_dev, st.st_ino, file_offset);
	if (!pr)
		return -ENOENT;
	bpf_link__destroy(pr->link);
	free(pr->path);
	free(pr->real);
	*pr = p->pr[--p->npr];
	p->rt_valid = false;
	return 0;
}

void gb_probetrap__set_stepping(struct gb_probetrap *p, pid_t tid, bool on)
{
	__u32 key = (__u32)tid;
	__u8 one = 1;

	if (!p)
		return;
	if (on)
		bpf_map_update_elem(bpf_map__fd(p->skel->maps.stepping), &key, &one, BPF_ANY);
	else
		bpf_map_delete_elem(bpf_map__fd(p->skel->maps.stepping), &key);
}

int gb_probetrap__drain(struct gb_probetrap *p)
{
	size_t before;
	int err;

	if (!p)
		return 0;
	before = p->nq;
	err = ring_buffer__consume(p->rb);
	if (err < 0)
		return err;
	return (int)(p->nq - before);
}

int gb_probetrap__poll_fd(const struct gb_probetrap *p)
{
	return p ? ring_buffer__epoll_fd(p->rb) : -1;
}

/* --- runtime addresses --------------------------------------------------- */

static int cmp_rt(const void *a, const void *b)
{
	const struct rt *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool same_file(const struct probe *pr, const struct gb_map *m)
{
	if (m->inode != (uint64_t)pr->ino)
		return false;
	/* overlayfs shows the underlying device in maps: the path decides. */
	return (m->dev_major == major(pr->dev) && m->dev_minor == minor(pr->dev)) ||
	       !strcmp(m->path, pr->real);
}

/* Every probe's runtime address(es), from /proc/PID/maps. */
static int refresh_rt(struct gb_probetrap *p)
{
	struct gb_maps m = { 0 };
	struct rt *v = NULL;
	size_t n = 0, cap = 0;
	int err = gb_maps_read(p->tgid, &m);

	if (err)
		return err;
	for (size_t i = 0; i < m.n; i++) {
		const struct gb_map *mp = &m.v[i];
		for (size_t j = 0; j < p->npr; j++) {
			const struct probe *pr = &p->pr[j];
			if (pr->off < mp->offset || pr->off - mp->offset >= mp->end - mp->start ||
			    !same_file(pr, mp))
				continue;
			if (n == cap) {
				struct rt *nv;
				cap = cap ? 2 * cap : 64;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					gb_maps_free(&m);
					return -ENOMEM;
				}
				v = nv;
			}
			v[n].addr = mp->start + (pr->off - mp->offset);
			v[n].orig = pr->orig;
			n++;
		}
	}
	gb_maps_free(&m);
	qsort(v, n, sizeof(*v), cmp_rt);
	free(p->rt);
	p->rt = v;
	p->nrt = n;
	p->rt_valid = true;
	return 0;
}

/* Index of the first runtime address >= addr. */
static size_t rt_lower(const struct gb_probetrap *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nrt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->rt[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool is_probed(struct gb_probetrap *p, uint64_t addr)
{
	size_t i;

	if (!p->rt_valid && refresh_rt(p) != 0)
		return false;
	i = rt_lower(p, addr);
	return i < p->nrt && p->rt[i].addr == addr;
}

void gb_probetrap__maps_changed(struct gb_probetrap *p)
{
	if (p)
		p->rt_valid = false;
}

int gb_probetrap__orig_bytes(struct gb_probetrap *p, uint64_t addr, uint8_t *buf, size_t len)
{
	int fixed = 0, err;

	if (!p || !buf)
		return -EINVAL;
	if (!p->rt_valid && (err = refresh_rt(p)) != 0)
		return err;
	for (size_t i = rt_lower(p, addr); i < p->nrt && p->rt[i].addr - addr < len; i++) {
		uint8_t *b = &buf[p->rt[i].addr - addr];
		if (*b == 0xCC && p->rt[i].orig != 0xCC) {
			*b = p->rt[i].orig;
			fixed++;
		}
	}
	return fixed;
}

/* --- claiming stops ------------------------------------------------------ */

static int pending_get(struct gb_probetrap *p, pid_t tid, struct pending *v)
{
	__u32 key = (__u32)tid;

	memset(v, 0, sizeof(*v));
	return bpf_map_lookup_elem(bpf_map__fd(p->skel->maps.pt_pending), &key, v);
}

static void pending_put(struct gb_probetrap *p, pid_t tid, const struct pending *v)
{
	int fd = bpf_map__fd(p->skel->maps.pt_pending);
	__u32 key = (__u32)tid;

	/* Only thread tid raises its counts, while it runs; it is stopped now. */
	if (v->sig == 0 && v->stop == 0)
		bpf_map_delete_elem(fd, &key);
	else
		bpf_map_update_elem(fd, &key, v, BPF_ANY);
}

static void fill_hit(struct gb_probe_hit *hit, const struct gb_ev_probe *e)
{
	struct user_regs_struct *r = &hit->regs;

	memset(hit, 0, sizeof(*hit));
	r->r15 = e->r15;
	r->r14 = e->r14;
	r->r13 = e->r13;
	r->r12 = e->r12;
	r->rbp = e->bp;
	r->rbx = e->bx;
	r->r11 = e->r11;
	r->r10 = e->r10;
	r->r9 = e->r9;
	r->r8 = e->r8;
	r->rax = e->ax;
	r->rcx = e->cx;
	r->rdx = e->dx;
	r->rsi = e->si;
	r->rdi = e->di;
	r->orig_rax = e->orig_ax;
	r->rip = e->ip;
	r->cs = e->cs;
	r->eflags = e->flags;
	r->rsp = e->sp;
	r->ss = e->ss;
	hit->addr = e->ip;
	hit->ns = e->h.ns;
	hit->cpu = e->h.cpu;
	if (e->pflags & GB_PROBE_F_SIGSTOP)
		hit->flags |= GB_PROBE_HIT_SIGSTOP;
}

bool gb_probetrap__claim(struct gb_probetrap *p, pid_t tid, int sig, const siginfo_t *si,
			 struct gb_probe_hit *hit)
{
	struct pending pd;
	bool stop = sig == SIGSTOP && p && p->signo != SIGSTOP;
	uint32_t *n;

	if (!p || tid <= 0 || (sig != p->signo && sig != SIGSTOP))
		return false;
	/* bpf_send_signal_thread sends with si_code SI_KERNEL. */
	if (si && si->si_code != SI_KERNEL)
		return false;
	if (pending_get(p, tid, &pd) != 0)
		return false;
	n = stop ? &pd.stop : &pd.sig;
	if (*n == 0)
		return false;
	(*n)--;
	pending_put(p, tid, &pd);
	p->claimed++;
	gb_probetrap__drain(p);
	for (size_t i = 0; i < p->nq; i++) {
		const struct gb_ev_probe *e = &p->q[i];
		if ((pid_t)e->h.tid != tid || (int)e->signo != (stop ? SIGSTOP : p->signo))
			continue;
		if (hit) {
			fill_hit(hit, e);
			if (!is_probed(p, hit->addr))
				p->rt_valid = false; /* a new mapping: look again when needed */
		}
		memmove(&p->q[i], &p->q[i + 1], (p->nq - i - 1) * sizeof(*p->q));
		p->nq--;
		return true;
	}
	/* Ours, but the record was lost (ring buffer full). */
	if (hit) {
		memset(hit, 0, sizeof(*hit));
		hit->flags = GB_PROBE_HIT_LOST | (stop ? GB_PROBE_HIT_SIGSTOP : 0);
	}
	return true;
}

bool gb_probetrap__is_step_artifact(struct gb_probetrap *p, pid_t tid, uint64_t rip_before,
				    int sig, const siginfo_t *si)
{
	if (!p || sig != SIGTRAP || !si)
		return false;
	/* uprobes' post-xol / emulation path: send_sig(SIGTRAP, current, 0). */
	if (si->si_code != SI_USER || si->si_pid != p->tgid)
		return false;
	return is_probed(p, rip_before);
}

void gb_probe_hit__complete(struct gb_probe_hit *hit, const struct user_regs_struct *at_stop)
{
	hit->regs.fs_base = at_stop->fs_base;
	hit->regs.gs_base = at_stop->gs_base;
	hit->regs.ds = at_stop->ds;
	hit->regs.es = at_stop->es;
	hit->regs.fs = at_stop->fs;
	hit->regs.gs = at_stop->gs;
}

void gb_probetrap__forget(struct gb_probetrap *p, pid_t tid)
{
	__u32 key = (__u32)tid;
	size_t j = 0;

	if (!p)
		return;
	gb_probetrap__set_stepping(p, tid, false);
	bpf_map_delete_elem(bpf_map__fd(p->skel->maps.pt_pending), &key);
	gb_probetrap__drain(p);
	for (size_t i = 0; i < p->nq; i++)
		if ((pid_t)p->q[i].h.tid != tid)
			p->q[j++] = p->q[i];
	p->nq = j;
}

void gb_probetrap__disarm(struct gb_probetrap *p)
{
	if (p && p->skel->bss)
		__atomic_store_n(&p->skel->bss->disarmed, 1, __ATOMIC_RELEASE);
}

void gb_probetrap__stats(const struct gb_probetrap *p, struct gb_probetrap_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!p)
		return;
	int fd = bpf_map__fd(p->skel->maps.pt_counters);
	s->hits = gb_counter_sum(fd, GB_PCNT_HITS);
	s->stepping = gb_counter_sum(fd, GB_PCNT_STEPPING);
	s->records = gb_counter_sum(fd, GB_PCNT_RECORDS);
	s->lost = gb_counter_sum(fd, GB_PCNT_LOST);
	s->signals = gb_counter_sum(fd, GB_PCNT_SIGNALS);
	s->sigstops = gb_counter_sum(fd, GB_PCNT_SIGSTOP);
	s->nosignal = gb_counter_sum(fd, GB_PCNT_NOSIGNAL);
	s->other = gb_counter_sum(fd, GB_PCNT_OTHER);
	s->claimed = p->claimed;
	s->probes = (unsigned)p->npr;
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p->skel->progs.gb_probe_hit), &info, &len) == 0)
		s->prog_id = info.id;
}

void gb_probetrap__free(struct gb_probetrap *p)
{
	if (!p)
		return;
	gb_probetrap__disarm(p);
	for (size_t i = 0; i < p->npr; i++) {
		bpf_link__destroy(p->pr[i].link);
		free(p->pr[i].path);
		free(p->pr[i].real);
	}
	free(p->pr);
	free(p->rt);
	free(p->q);
	ring_buffer__free(p->rb);
	probetrap_bpf__destroy(p->skel);
	free(p);
}
