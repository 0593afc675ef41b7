/* Sampler: the sample.bpf.c skeleton and its per-CPU perf events behind an
 * opaque type.  API: sampler.h.  Programs, maps, probing: docs/bpf.md. */
#include "probe/sampler.h"
#include "probe/btfmin.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stddef.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "gebpf_events.h"
#include "probe/counters.h"
#include "probe/features.h"
#include "sample.skel.h"

#define DEFAULT_HZ 999
#define DEFAULT_RINGBUF (4u << 20)
#define DEFAULT_RINGBUF_STACKS (32u << 20)
#define DEFAULT_STACK_SIZE 8192u

struct gb_sampler {
	struct sample_bpf *skel;
	const struct gb_perf_event *ev;
	uint64_t hz;
	struct bpf_link *fork_link;     /* follows children (-p, launch) */
	struct gb_faults *faults;       /* shares our ring buffer (opts.faults) */
	struct bpf_link **links;        /* one per CPU; each owns its perf event fd */
	int nlinks, ncpus;
	struct ring_buffer *rb;
	const struct gb_sampler_cbs *cbs;  /* the poll in progress */
	int delivered;
};

static int on_record(void *ctx, void *data, size_t len)
{
	struct gb_sampler *s = ctx;
	const struct gb_ev_hdr *h = data;
	const struct gb_sampler_cbs *cbs = s->cbs;
	const size_t fixed = offsetof(struct gb_ev_sample_stack, stack);
	char comm[GB_COMM_LEN + 1];

	if (len < sizeof(*h) || !cbs)
		return 0;
	if ((h->kind == GB_EV_SAMPLE && len >= sizeof(struct gb_ev_sample)) ||
	    (h->kind == GB_EV_SAMPLE_STACK && len >= fixed)) {
		const struct gb_ev_sample *e = data;
		memcpy(comm, e->comm, GB_COMM_LEN);
		comm[GB_COMM_LEN] = 0;
		struct gb_sample smp = {
			.tid = (pid_t)h->tid, .pid = (pid_t)h->tgid, .comm = comm, .cpu = h->cpu,
			.pc = e->pc, .ns = h->ns, .in_kernel = e->flags & GB_SAMPLE_F_KERNEL,
		};
		if (h->kind == GB_EV_SAMPLE_STACK) {
			const struct gb_ev_sample_stack *st = data;
			smp.ustack = (const uint64_t *)st->ustack;
			smp.nuser = st->nuser > GB_MAX_STACK ? GB_MAX_STACK : st->nuser;
			smp.kstack = (const uint64_t *)st->kstack;
			smp.nkernel = st->nkernel > GB_MAX_KSTACK ? GB_MAX_KSTACK : st->nkernel;
			if (st->s.flags & GB_SAMPLE_F_REGS) {
				smp.regs = &st->uregs;
				smp.stack = st->stack;
				smp.stack_len = st->stack_len > len - fixed ? len - fixed : st->stack_len;
			}
			smp.py = st->py;
			smp.npy = st->npy > GB_MAX_PYFRAMES ? GB_MAX_PYFRAMES : st->npy;
			smp.pystate = st->pystate;
		}
		s->delivered++;
		return cbs->sample ? cbs->sample(cbs->ctx, &smp) : 0;
	}
	struct gb_fault f;
	if (gb_fault_from_record(data, len, &f)) {
		s->delivered++;
		return cbs->fault ? cbs->fault(cbs->ctx, &f) : 0;
	}
	return 0;
}

static long max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static const char *perm_hint(int err)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		return " (needs root: CAP_BPF and CAP_PERFMON)";
	if (err == -EACCES)
		return " (rejected by the verifier: -v shows its log)";
	return "";
}

/* Which event, at which rate: a clear error for what this machine lacks. */
static int pick_event(struct gb_sampler *s, const struct gb_sampler_opts *o)
{
	long maxrate;
	int err;

	if (o->event) {
		s->ev = gb_perf_event_find(o->event);
		if (!s->ev) {
			gb_err("sample: event %s: unknown (known: %s)", o->event, gb_perf_event_names());
			return -EINVAL;
		}
		err = gb_perf_event_probe(s->ev);
		if (err == -ENOENT || err == -EOPNOTSUPP || err == -ENODEV) {
			gb_err("sample: event %s: not supported on this machine (%s); try --event cpu-clock",
			       s->ev->name, s->ev->type == PERF_TYPE_HARDWARE ?
			       "no hardware PMU" : strerror(-err));
			return -EOPNOTSUPP;
		}
		if (err) {
			gb_err("sample: event %s: %s%s", s->ev->name, strerror(-err), perm_hint(err));
			return err;
		}
	} else {
		s->ev = gb_perf_event_default();
	}
	s->hz = o->hz ? o->hz : DEFAULT_HZ;
	maxrate = max_sample_rate();
	if (maxrate > 0 && s->hz > (uint64_t)maxrate) {
		gb_err("sample: -F %llu: above kernel.perf_event_max_sample_rate (%ld)",
		       (unsigned long long)s->hz, maxrate);
		return -EINVAL;
	}
	return 0;
}

struct loading {
	struct gb_sampler *s;
	const struct gb_sampler_opts *o;
	size_t rb_bytes;
	uint32_t stack_size;
};

/* Open and load the object (s->skel) with the kernel's BTF cut to its
 * types if cut (gb_btfmin_load): 0, or -1 (said unless cut, but for the
 * count of CPUs). */
static int open_load(void *ctx, const char *cut)
{
	const struct loading *ld = ctx;
	struct gb_sampler *s = ld->s;
	const struct gb_sampler_opts *o = ld->o;
	size_t rb_bytes = ld->rb_bytes;
	uint32_t stack_size = ld->stack_size;
	int ncpus, err;

	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = cut);
	sample_bpf__destroy(s->skel);
	s->skel = sample_bpf__open_opts(&oo);
	if (!s->skel) {
		if (!cut)
			gb_err("sample: opening BPF object: %s", strerror(errno));
		return -1;
	}
	s->skel->rodata->self_tgid = (__u32)getpid();
	s->skel->rodata->scope_all = o->all;
	s->skel->rodata->targ_cgroup = o->cgroup_id;
	s->skel->rodata->has_range = o->has_range;
	s->skel->rodata->want_fp = o->stacks == GB_STACK_FP;
	s->skel->rodata->want_regs = o->stacks == GB_STACK_DWARF;
	s->skel->rodata->want_kernel = o->kernel;
	s->skel->rodata->stack_size = stack_size;
	s->skel->rodata->want_python = o->python && o->stacks != GB_STACK_NONE;
	/* Children are followed through the targets map: -p and launch only. */
	bpf_program__set_autoload(s->skel->progs.gb_follow_fork, o->npids > 0);
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) {
		gb_err("sample: counting CPUs: %s", strerror(ncpus ? -ncpus : EINVAL));
		return -1;
	}
	bpf_map__set_max_entries(s->skel->maps.scratch, (__u32)ncpus);
	s->skel->rodata->has_task_pt_regs = gb_feat_perf_helper(BPF_FUNC_task_pt_regs);
	if (!s->skel->rodata->has_task_pt_regs)
		gb_info("sample: no bpf_task_pt_regs(): user pc of in-kernel samples from the task stack");
	/* We poll with a timeout: wake up only when a quarter is full. */
	s->skel->rodata->wakeup_bytes = rb_bytes / 4;
	s->skel->data->armed = !o->wait_exec;
	s->skel->data->range_start = o->start;
	s->skel->data->range_end = o->end;
	bpf_map__set_max_entries(s->skel->maps.events, (__u32)rb_bytes);

	err = sample_bpf__load(s->skel);
	if (err && !cut)
		gb_err("sample: loading the perf_event program: %s%s", strerror(-err),
		       perm_hint(err));
	return err ? -1 : 0;
}

struct gb_sampler *gb_sampler__new(const struct gb_sampler_opts *o)
{
	struct gb_sampler *s;
	size_t rb_bytes = o->ringbuf_bytes ? o->ringbuf_bytes :
			  o->stacks || o->kernel ? DEFAULT_RINGBUF_STACKS : DEFAULT_RINGBUF;
	uint32_t stack_size = o->stack_size ? o->stack_size : DEFAULT_STACK_SIZE;

	if (!o->all && !o->cgroup_id && !o->npids) {
		gb_err("sample: no process to sample");
		return NULL;
	}
	if (o->faults && (o->all || o->cgroup_id || o->npids != 1)) {
		gb_err("sample: page faults are recorded for one process only");
		return NULL;
	}
	if (stack_size % 8 || stack_size > GB_MAX_STACK_BYTES) {
		gb_err("sample: stack size %u: expected a multiple of 8 up to %u", stack_size,
		       GB_MAX_STACK_BYTES);
		return NULL;
	}
	if (rb_bytes & (rb_bytes - 1)) {
		gb_err("sample: ring buffer size %zu: not a power of 2", rb_bytes);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		gb_err("sample: %s", strerror(ENOMEM));
		return NULL;
	}
	gb_probe_libbpf_init();
	if (!gb_feat_kernel_btf()) {
		gb_err("sample: kernel has no BTF (/sys/kernel/btf/vmlinux): the sampler's "
		       "CO-RE program cannot be relocated");
		goto fail;
	}
	if (pick_event(s, o))
		goto fail;

	{
		/* With the cached cut of the kernel's BTF when there is one (a
		 * load it makes fail: made again with the kernel's). */
		size_t len = 0;
		const void *obj = sample_bpf__elf_bytes(&len);
		bool used;
		if (gb_btfmin_load("sample", obj, len, open_load,
				   &(struct loading){ s, o, rb_bytes, stack_size }, &used))
			goto fail;
	}
	for (size_t i = 0; i < o->npids; i++) {
		__u32 key = (__u32)o->pids[i];
		__u8 one = 1;
		if (bpf_map__update_elem(s->skel->maps.targets, &key, sizeof(key), &one,
					 sizeof(one), BPF_ANY)) {
			gb_err("sample: pid %d: adding to the scope: %s", o->pids[i], strerror(errno));
			goto fail;
		}
	}
	if (o->faults) {
		struct gb_faults_opts fo = {
			.tgid = o->pids[0], .share = true, .wakeup_bytes = rb_bytes / 4,
			.wait_exec = o->wait_exec,
			.events_fd = bpf_map__fd(s->skel->maps.events),
			.counters_fd = bpf_map__fd(s->skel->maps.counters),
		};
		s->faults = gb_faults__new(&fo);
		if (!s->faults)
			goto fail;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_record, s, NULL);
	if (!s->rb) {
		gb_err("sample: ring buffer: %s", strerror(errno));
		goto fail;
	}
	return s;
fail:
	gb_sampler__free(s);
	return NULL;
}

void gb_sampler__set_range(struct gb_sampler *s, uint64_t start, uint64_t end)
{
	/* The program reads these from a memory-mapped map while it runs:
	 * close the range first, so no half-updated pair is ever wider than
	 * the old or the new range. */
	__atomic_store_n(&s->skel->data->range_start, UINT64_MAX, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->skel->data->range_end, end, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->skel->data->range_start, start, __ATOMIC_SEQ_CST);
}

int gb_sampler__add_python(struct gb_sampler *s, pid_t pid, const struct gb_py_layout *l)
{
	__u32 key = (__u32)pid;

	if (bpf_map__update_elem(s->skel->maps.py_procs, &key, sizeof(key), l, sizeof(*l),
				 BPF_ANY))
		return -errno;
	return 0;
}

void gb_sampler__del_python(struct gb_sampler *s, pid_t pid)
{
	__u32 key = (__u32)pid;

	bpf_map__delete_elem(s->skel->maps.py_procs, &key, sizeof(key), 0);
}

void gb_sampler__arm(struct gb_sampler *s)
{
	__atomic_store_n(&s->skel->data->armed, 1, __ATOMIC_SEQ_CST);
	gb_faults__arm(s->faults);
}

int gb_sampler__start(struct gb_sampler *s)
{
	struct perf_event_attr a;
	int err = 0;

	if (s->links)
		return 0;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		gb_err("sample: counting CPUs: %s", strerror(-s->ncpus));
		return s->ncpus ? s->ncpus : -EINVAL;
	}
	s->links = calloc((size_t)s->ncpus, sizeof(*s->links));
	if (!s->links)
		return -ENOMEM;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = s->ev->type;
	a.config = s->ev->config;
	a.freq = 1;
	a.sample_freq = s->hz;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV)
				continue;   /* possible but offline CPU */
			err = -errno;
			gb_err("sample: perf_event_open %s on CPU %d: %s%s", s->ev->name, cpu,
			       strerror(-err), perm_hint(err));
			goto fail;
		}
		struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.gb_sample, fd);
		if (!l) {
			err = -errno;
			close(fd);
			gb_err("sample: attaching to %s on CPU %d: %s", s->ev->name, cpu, strerror(-err));
			goto fail;
		}
		s->links[s->nlinks++] = l;
	}
	if (!s->nlinks) {
		gb_err("sample: no online CPU to sample on");
		err = -ENODEV;
		goto fail;
	}
	if (bpf_program__autoload(s->skel->progs.gb_follow_fork)) {
		s->fork_link = bpf_program__attach(s->skel->progs.gb_follow_fork);
		if (!s->fork_link) {
			err = -errno;
			gb_err("sample: following forks (raw_tp/sched_process_fork): %s",
			       strerror(-err));
			goto fail;
		}
	}
	if (s->faults && (err = gb_faults__start(s->faults)))
		goto fail;
	return 0;
fail:
	gb_sampler__stop(s);
	return err;
}

void gb_sampler__stop(struct gb_sampler *s)
{
	if (!s)
		return;
	/* Destroying a perf link disables and closes its event. */
	for (int i = 0; i < s->nlinks; i++)
		bpf_link__destroy(s->links[i]);
	free(s->links);
	s->links = NULL;
	s->nlinks = 0;
	bpf_link__destroy(s->fork_link);
	s->fork_link = NULL;
	gb_faults__stop(s->faults);
}

int gb_sampler__drain(struct gb_sampler *s, const struct gb_sampler_cbs *cbs)
{
	int err;

	s->cbs = cbs;
	s->delivered = 0;
	err = ring_buffer__consume(s->rb);
	s->cbs = NULL;
	return err < 0 ? err : s->delivered;
}

int gb_sampler__fd(const struct gb_sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

void gb_sampler__stats(const struct gb_sampler *s, struct gb_sampler_stats *st)
{
	int fd = bpf_map__fd(s->skel->maps.counters);

	st->seen = gb_counter_sum(fd, GB_CNT_SEEN);
	st->kept = gb_counter_sum(fd, GB_CNT_KEPT);
	st->other = gb_counter_sum(fd, GB_CNT_OTHER);
	st->out_of_range = gb_counter_sum(fd, GB_CNT_OUT_OF_RANGE);
	st->lost = gb_counter_sum(fd, GB_CNT_LOST);
	st->faults = gb_counter_sum(fd, GB_CNT_FAULTS);
	st->faults_lost = gb_counter_sum(fd, GB_CNT_FAULTS_LOST);
}

const char *gb_sampler__event(const struct gb_sampler *s)
{
	return s->ev->name;
}

uint64_t gb_sampler__hz(const struct gb_sampler *s)
{
	return s->hz;
}

void gb_sampler__free(struct gb_sampler *s)
{
	if (!s)
		return;
	gb_sampler__stop(s);
	ring_buffer__free(s->rb);
	gb_faults__free(s->faults);
	sample_bpf__destroy(s->skel);
	free(s);
}
