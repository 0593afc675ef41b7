/* Probe trap: the probetrap.bpf.c skeleton behind an opaque type, and the
 * stops it causes (the probes themselves: probeset.c).  API and the engine's
 * contract: probetrap.h.  The program: docs/bpf.md. */
#include "probe/probetrap.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "gebpf_events.h"
#include "probe/counters.h"
#include "probe/features.h"
#include "probe/btfmin.h"
#include "probe/probetrap_int.h"
#include "probe/umulti.h"
#include "probetrap.skel.h"

/* The pending-signal counts of one thread (pt_pending's value). */
struct pending {
	uint32_t sig, stop, alt;
};

#define say(o, ...) gb_probe_warn((o)->quiet, "probe trap", (int)(o)->tgid, __VA_ARGS__)

static int on_record(void *ctx, void *data, size_t len)
{
	struct gb_probetrap *p = ctx;
	const struct gb_ev_probe *e = data;

	if (len < sizeof(*e) || e->h.kind != GB_EV_PROBE)
		return 0;
	if (GB_GROW(&p->q, &p->capq, p->nq + 1))
		return -ENOMEM;
	p->q[p->nq++] = *e;
	p->consumed++;
	return 0;
}

/* One trap loaded ahead (gb_probetrap__prepare), for these options. */
static struct gb_probetrap *prepared;
static struct gb_probetrap_opts prepared_o;
static double prepared_ms;

/* -v's word for a load with the cached cut of the kernel's BTF. */
#define CUT_SAID " (the kernel's BTF cut to its types: docs/trace.md \"Start-up cost\")"

struct loading {
	struct gb_probetrap *p;
	const struct gb_probetrap_opts *o;
};

/* Open and load the object (p->skel) with the kernel's BTF cut to its
 * types if cut (gb_btfmin_load): 0, or a negative errno (said unless cut). */
static int open_load(void *ctx, const char *cut)
{
	struct gb_probetrap *p = ((struct loading *)ctx)->p;
	const struct gb_probetrap_opts *o = ((struct loading *)ctx)->o;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = cut);
	int err;

	probetrap_bpf__destroy(p->skel);
	p->skel = probetrap_bpf__open_opts(&oo);
	if (!p->skel) {
		err = -errno;
		if (!cut)
			say(o, "opening BPF object: %s", strerror(-err));
		return err;
	}
	p->skel->rodata->tgid = (__u32)o->tgid;
	p->skel->rodata->signo = (__u32)p->signo;
	p->skel->rodata->alt_signo = (__u32)p->alt;
	/* uprobe_multi links where the kernel has them (6.10+): a link of many
	 * probes is removed with one wait for the kernel's grace periods
	 * instead of one per probe.  GEBPF_PROBETRAP_PERF=1 forces the perf
	 * events (the 5.10 path) for tests. */
	p->multi = gb_umulti_supported() && !getenv("GEBPF_PROBETRAP_PERF");
	p->skel->rodata->has_cookie = p->multi;
	if (p->multi)
		bpf_program__set_expected_attach_type(
			p->skel->progs.gb_probe_hit, (enum bpf_attach_type)GB_BPF_TRACE_UPROBE_MULTI);
	/* Redirects (redirect.c) where the verifier takes a write of ip. */
	p->redirect = o->redirect && !getenv("GEBPF_PROBETRAP_NOREDIRECT") &&
		      gb_feat_uprobe_write_ctx();
	p->skel->rodata->redirect = p->redirect;
	err = probetrap_bpf__load(p->skel);
	if (err && !cut)
		say(o, "loading the uprobe program: %s%s", strerror(-err),
		    err == -EPERM ? " (needs root: CAP_BPF and CAP_PERFMON)" : "");
	return err;
}

static struct gb_probetrap *load(const struct gb_probetrap_opts *o);

void gb_probetrap__prepare(const struct gb_probetrap_opts *o)
{
	if (prepared)
		return;
	struct gb_probetrap_opts q = *o;
	q.quiet = q.silent = true; /* (said when it is used; failing, new says why) */
	double t0 = gb_mono_s();
	prepared = load(&q);
	prepared_ms = (gb_mono_s() - t0) * 1e3;
	prepared_o = *o;
}

void gb_probetrap__unprepare(void)
{
	gb_probetrap__free(prepared);
	prepared = NULL;
}

struct gb_probetrap *gb_probetrap__new(const struct gb_probetrap_opts *o)
{
	struct gb_probetrap *p = prepared;
	if (p && prepared_o.tgid == o->tgid && prepared_o.signo == o->signo &&
	    prepared_o.redirect == o->redirect) {
		prepared = NULL;
		p->silent = o->silent;
		if (!p->silent)
			gb_info("probe trap: BPF program loaded in %.1f ms, before the target was "
				"stopped%s", prepared_ms, p->btf_cut ? CUT_SAID : "");
		return p;
	}
	return load(o);
}

static struct gb_probetrap *load(const struct gb_probetrap_opts *o)
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
	double t0 = gb_mono_s();
	p = calloc(1, sizeof(*p));
	if (!p) {
		say(o, "%s", strerror(ENOMEM));
		return NULL;
	}
	p->tgid = o->tgid;
	p->silent = o->silent;
	p->signo = o->signo ? o->signo : SIGURG;
	/* SIGWINCH, ignored by default as SIGURG is: a SIGSTOP only where the
	 * thread blocks or has pending both (contract 6) */
	p->alt = p->signo == SIGWINCH || p->signo == SIGSTOP ? 0 : SIGWINCH;
	/* With the cached cut of the kernel's BTF (btfmin.c) when there is
	 * one; a load it makes fail is made again with the kernel's. */
	size_t len = 0;
	const void *obj = probetrap_bpf__elf_bytes(&len);
	err = gb_btfmin_load("probetrap", obj, len, open_load, &(struct loading){ p, o },
			     &p->btf_cut);
	if (err)
		goto fail;
	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.pt_events), on_record, p, NULL);
	if (!p->rb) {
		say(o, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (!p->silent)
		gb_info("probe trap: BPF program loaded in %.1f ms%s", (gb_mono_s() - t0) * 1e3,
			p->btf_cut ? CUT_SAID : "");
	return p;
fail:
	gb_probetrap__free(p);
	return NULL;
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

/* --- claiming stops ------------------------------------------------------ */

static uint64_t submitted_records(struct gb_probetrap *p)
{
	return gb_counter_sum(bpf_map__fd(p->skel->maps.pt_counters), GB_PCNT_RECORDS);
}

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
	if (v->sig == 0 && v->stop == 0 && v->alt == 0)
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

/* The index in p->q of the oldest drained record of thread tid (with signal
 * signo, any when -1), or -1.  A record submitted behind one that another
 * thread has reserved and not yet submitted stays invisible to the consumer
 * (the ring stops at a busy record): with wait, while the program has
 * counted more records than were consumed, ours may be on its way, and the
 * ring is drained again (for at most 2 s). */
static ssize_t find_record(struct gb_probetrap *p, pid_t tid, int signo, bool wait)
{
	for (double until = 0;;) {
		gb_probetrap__drain(p);
		for (size_t i = 0; i < p->nq; i++)
			if ((pid_t)p->q[i].h.tid == tid && (signo < 0 || (int)p->q[i].signo == signo))
				return (ssize_t)i;
		if (!wait || submitted_records(p) <= p->consumed)
			return -1;
		if (until == 0)
			until = gb_mono_s() + 2.0;
		else if (gb_mono_s() > until)
			return -1;
		sched_yield();
	}
}

static void drop_record(struct gb_probetrap *p, size_t i)
{
	memmove(&p->q[i], &p->q[i + 1], (p->nq - i - 1) * sizeof(*p->q));
	p->nq--;
}

bool gb_probetrap__claim(struct gb_probetrap *p, pid_t tid, int sig, const siginfo_t *si,
			 struct gb_probe_hit *hit)
{
	struct pending pd;
	uint32_t *n;

	if (!p || tid <= 0 || !sig || (sig != p->signo && sig != SIGSTOP && sig != p->alt))
		return false;
	bool stop = sig == SIGSTOP && p->signo != SIGSTOP;
	/* bpf_send_signal_thread sends with si_code SI_KERNEL. */
	if (si && si->si_code != SI_KERNEL)
		return false;
	if (pending_get(p, tid, &pd) != 0)
		return false;
	n = stop ? &pd.stop : sig == p->signo ? &pd.sig : &pd.alt;
	if (*n == 0)
		return false;
	(*n)--;
	pending_put(p, tid, &pd);
	p->claimed++;
	for (size_t i = 0; i < p->nowed; i++) {
		if (p->owed[i].tid != tid || p->owed[i].signo != sig)
			continue;
		/* Its record was taken by take_early(): only the signal left. */
		p->owed[i] = p->owed[--p->nowed];
		if (hit) {
			memset(hit, 0, sizeof(*hit));
			hit->flags = GB_PROBE_HIT_TAKEN;
		}
		return true;
	}
	ssize_t k = find_record(p, tid, sig, true);
	if (k >= 0) {
		if (hit)
			fill_hit(hit, &p->q[k]);
		drop_record(p, (size_t)k);
		return true;
	}
	/* Ours, but the record was lost (ring buffer full). */
	if (hit) {
		memset(hit, 0, sizeof(*hit));
		hit->flags = GB_PROBE_HIT_LOST | (stop ? GB_PROBE_HIT_SIGSTOP : 0);
	}
	return true;
}

bool gb_probetrap__take_early(struct gb_probetrap *p, pid_t tid, struct gb_probe_hit *hit)
{
	struct pending pd;
	uint32_t owed = 0;

	if (!p)
		return false;
	/* Wait for a record still on its way only when a signal of a probe
	 * is pending for the thread beyond those whose records it took. */
	for (size_t i = 0; i < p->nowed; i++)
		owed += p->owed[i].tid == tid;
	bool coming = pending_get(p, tid, &pd) == 0 && pd.sig + pd.stop + pd.alt > owed;
	ssize_t k = find_record(p, tid, -1, coming);
	if (k < 0)
		return false;
	if (GB_GROW(&p->owed, &p->capowed, p->nowed + 1))
		return false;
	p->owed[p->nowed++] = (struct owed){ tid, (int)p->q[k].signo };
	fill_hit(hit, &p->q[k]);
	drop_record(p, (size_t)k);
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
	return gb_probetrap_is_probed(p, rip_before);
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
	gb_probetrap__redirect_thread(p, tid, false);
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

uint64_t gb_probetrap__disarmed_hits(const struct gb_probetrap *p)
{
	return p ? gb_counter_sum(bpf_map__fd(p->skel->maps.pt_counters), GB_PCNT_DISARMED) : 0;
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
	s->alts = gb_counter_sum(fd, GB_PCNT_ALT);
	s->nosignal = gb_counter_sum(fd, GB_PCNT_NOSIGNAL);
	s->other = gb_counter_sum(fd, GB_PCNT_OTHER);
	s->muted = gb_counter_sum(fd, GB_PCNT_MUTED);
	s->redirects = gb_counter_sum(fd, GB_PCNT_REDIRECTS);
	s->multi = p->multi;
	s->claimed = p->claimed;
	s->probes = gb_probetrap_live_probes(p);
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
	struct gb_probetrap_stats st;
	gb_probetrap__stats(p, &st);
	if (st.signals && !p->silent)
		gb_info("probe trap: %llu stop signals sent: %llu SIGWINCH, %llu SIGSTOP (SIGURG "
			"blocked or pending)", (unsigned long long)st.signals,
			(unsigned long long)st.alts, (unsigned long long)st.sigstops);
	gb_probetrap_detach_all(p);
	free(p->rt);
	free(p->plain);
	free(p->q);
	free(p->owed);
	ring_buffer__free(p->rb);
	probetrap_bpf__destroy(p->skel);
	free(p);
}
