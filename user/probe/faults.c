/* Page-fault capture: the faults.bpf.c skeleton behind an opaque type.
 * API and guarantees: faults.h.  Programs, attach points: docs/bpf.md. */
#include "probe/faults.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "faults.skel.h"
#include "gebpf_events.h"
#include "probe/counters.h"
#include "probe/features.h"

#define DEFAULT_RINGBUF (4u << 20)

struct gb_faults {
	struct faults_bpf *skel;
	struct bpf_program *prog;    /* the program chosen at run time */
	struct bpf_link *link;
	struct ring_buffer *rb;      /* NULL when the ring buffer is shared */
	bool raw;
	/* the drain in progress */
	gb_fault_cb cb;
	void *cb_ctx;
	int delivered;
};

bool gb_fault_from_record(const void *data, size_t len, struct gb_fault *out)
{
	const struct gb_ev_fault *e = data;

	if (len < sizeof(*e) || e->h.kind != GB_EV_FAULT)
		return false;
	out->tid = (pid_t)e->h.tid;
	out->cpu = e->h.cpu;
	out->addr = e->addr;
	out->ip = e->ip;
	out->err = e->err;
	out->ns = e->h.ns;
	return true;
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct gb_faults *f = ctx;
	struct gb_fault ev;

	if (!gb_fault_from_record(data, len, &ev) || !f->cb)
		return 0;
	f->delivered++;
	return f->cb(f->cb_ctx, &ev);
}

static const char *load_hint(int err)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		return " (needs root: CAP_BPF and CAP_PERFMON)";
	if (err == -EACCES)
		return " (rejected by the verifier: -v shows its log)";
	return "";
}

struct gb_faults *gb_faults__new(const struct gb_faults_opts *o)
{
	struct gb_faults *f;
	size_t rb_bytes = o->ringbuf_bytes ? o->ringbuf_bytes : DEFAULT_RINGBUF;
	int err;

	if (o->tgid <= 0) {
		gb_err("faults: no process to watch");
		return NULL;
	}
	if (!o->share && (rb_bytes & (rb_bytes - 1))) {
		gb_err("faults: ring buffer size %zu: not a power of 2", rb_bytes);
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		gb_err("faults: %s", strerror(ENOMEM));
		return NULL;
	}
	gb_probe_libbpf_init();

	f->skel = faults_bpf__open();
	if (!f->skel) {
		gb_err("faults: opening BPF object: %s", strerror(errno));
		goto fail;
	}
	/* tp_btf where the kernel has the tracepoint's BTF, else the raw
	 * tracepoint (same arguments, no BTF needed). */
	f->raw = !gb_feat_btf_typedef("btf_trace_page_fault_user");
	if (f->raw)
		gb_warn("faults: kernel BTF lacks tracepoint page_fault_user: "
			"using raw_tp/page_fault_user instead of tp_btf");
	f->prog = f->raw ? f->skel->progs.gb_fault_raw : f->skel->progs.gb_fault_btf;
	bpf_program__set_autoload(f->raw ? f->skel->progs.gb_fault_btf : f->skel->progs.gb_fault_raw,
				  false);

	f->skel->rodata->targ_tgid = (__u32)o->tgid;
	f->skel->rodata->wakeup_bytes = o->wakeup_bytes;
	f->skel->data->armed = !o->wait_exec;
	if (o->share) {
		err = bpf_map__reuse_fd(f->skel->maps.events, o->events_fd);
		if (!err)
			err = bpf_map__reuse_fd(f->skel->maps.counters, o->counters_fd);
		if (err) {
			gb_err("faults: sharing the ring buffer: %s", strerror(-err));
			goto fail;
		}
	} else {
		bpf_map__set_max_entries(f->skel->maps.events, (__u32)rb_bytes);
	}

	err = faults_bpf__load(f->skel);
	if (err) {
		gb_err("faults: loading %s/page_fault_user for pid %d: %s%s",
		       f->raw ? "raw_tp" : "tp_btf", o->tgid, strerror(-err), load_hint(err));
		goto fail;
	}
	if (!o->share) {
		f->rb = ring_buffer__new(bpf_map__fd(f->skel->maps.events), on_record, f, NULL);
		if (!f->rb) {
			gb_err("faults: ring buffer: %s", strerror(errno));
			goto fail;
		}
	}
	return f;
fail:
	gb_faults__free(f);
	return NULL;
}

int gb_faults__start(struct gb_faults *f)
{
	if (f->link)
		return 0;
	f->link = bpf_program__attach(f->prog);
	if (!f->link) {
		int err = -errno;
		gb_err("faults: attaching %s/page_fault_user: %s%s", f->raw ? "raw_tp" : "tp_btf",
		       strerror(-err), load_hint(err));
		return err;
	}
	return 0;
}

void gb_faults__arm(struct gb_faults *f)
{
	if (f)
		__atomic_store_n(&f->skel->data->armed, 1, __ATOMIC_SEQ_CST);
}

void gb_faults__stop(struct gb_faults *f)
{
	if (f && f->link) {
		bpf_link__destroy(f->link);
		f->link = NULL;
	}
}

int gb_faults__drain(struct gb_faults *f, gb_fault_cb cb, void *ctx)
{
	int err;

	if (!f->rb)
		return -EINVAL;
	f->cb = cb;
	f->cb_ctx = ctx;
	f->delivered = 0;
	err = ring_buffer__consume(f->rb);
	f->cb = NULL;
	return err < 0 ? err : f->delivered;
}

void gb_faults__stats(const struct gb_faults *f, struct gb_faults_stats *st)
{
	int fd = bpf_map__fd(f->skel->maps.counters);

	st->recorded = gb_counter_sum(fd, GB_CNT_FAULTS);
	st->lost = gb_counter_sum(fd, GB_CNT_FAULTS_LOST);
}

void gb_faults__free(struct gb_faults *f)
{
	if (!f)
		return;
	gb_faults__stop(f);
	ring_buffer__free(f->rb);
	faults_bpf__destroy(f->skel);
	free(f);
}
