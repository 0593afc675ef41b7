/* Protection watcher: the protwatch.bpf.c skeleton behind an opaque type.
 * API and guarantees: protwatch.h.  Programs, attach points: docs/bpf.md. */
#include "probe/protwatch.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "gebpf_events.h"
#include "probe/features.h"
#include "protwatch.skel.h"

struct gb_protwatch {
	struct protwatch_bpf *skel;
	struct bpf_link *link;
	struct ring_buffer *rb;
	int pending_fd;              /* pw_pending: tid -> unclaimed signals */
	uint64_t start, end;
	uint64_t lost_seen;          /* skel->bss->lost already reported */
	/* the drain in progress */
	gb_prot_cb cb;
	void *cb_ctx;
	int delivered;
};

#define say(o, ...) gb_probe_warn((o)->quiet, "protwatch", (int)(o)->tgid, __VA_ARGS__)

static const char *hint(int err)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		return " (needs root: CAP_BPF and CAP_PERFMON)";
	if (err == -EACCES || err == -EINVAL)
		return " (rejected by the verifier: -v shows its log)";
	return "";
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct gb_protwatch *w = ctx;
	const struct gb_ev_prot *e = data;
	struct gb_prot_change c;

	if (len < sizeof(*e) || e->h.kind != GB_EV_PROT)
		return 0;
	c.tid = (pid_t)e->h.tid;
	c.nr = e->nr;
	c.addr = e->addr;
	c.len = e->len;
	c.prot = e->prot;
	w->delivered++;
	if (w->cb)
		w->cb(w->cb_ctx, &c);
	return 0;
}

struct gb_protwatch *gb_protwatch__new(const struct gb_protwatch_opts *o)
{
	struct gb_protwatch *w = NULL;
	const char *kind = "tp_btf";
	bool raw;
	int err;

	if (o->tgid <= 0 || o->start >= o->end || o->signo <= 0 || o->signo >= NSIG) {
		say(o, "bad watch [0x%llx, 0x%llx) signal %d", (unsigned long long)o->start,
		    (unsigned long long)o->end, o->signo);
		return NULL;
	}
	gb_probe_libbpf_init();
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_send_signal_thread,
				    NULL) != 1) {
		say(o, "the kernel has no bpf_send_signal_thread (Linux 5.5)%s",
		    geteuid() ? " or this is not root" : "");
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		say(o, "%s", strerror(ENOMEM));
		return NULL;
	}
	w->start = o->start;
	w->end = o->end;
	w->pending_fd = -1;

	w->skel = protwatch_bpf__open();
	if (!w->skel) {
		say(o, "opening BPF object: %s", strerror(errno));
		goto fail;
	}
	/* The raw tracepoint: same arguments as tp_btf/sys_exit, but it needs
	 * no kernel BTF, and parsing that (to probe and to load the tp_btf
	 * program) cost every trace ~100 ms of start-up.  The tp_btf program
	 * stays for GEBPF_PROTWATCH_BTF=1 (typed loads checked by the
	 * verifier). */
	raw = !getenv("GEBPF_PROTWATCH_BTF") || !gb_feat_btf_typedef("btf_trace_sys_exit");
	if (raw)
		kind = "raw_tp";
	bpf_program__set_autoload(raw ? w->skel->progs.gb_prot_btf : w->skel->progs.gb_prot_raw,
				  false);
	w->skel->rodata->targ_tgid = (__u32)o->tgid;
	w->skel->rodata->targ_start = o->start;
	w->skel->rodata->targ_end = o->end;
	w->skel->rodata->targ_signo = (__u32)o->signo;
	w->skel->rodata->skip_ip0 = o->skip_ip[0];
	w->skel->rodata->skip_ip1 = o->skip_ip[1];

	err = protwatch_bpf__load(w->skel);
	if (err) {
		say(o, "loading %s/sys_exit: %s%s", kind, strerror(-err), hint(err));
		goto fail;
	}
	w->pending_fd = bpf_map__fd(w->skel->maps.pw_pending);
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.pw_events), on_record, w, NULL);
	if (!w->rb) {
		say(o, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	w->link = bpf_program__attach(raw ? w->skel->progs.gb_prot_raw : w->skel->progs.gb_prot_btf);
	if (!w->link) {
		err = -errno;
		say(o, "attaching %s/sys_exit: %s%s", kind, strerror(-err), hint(err));
		goto fail;
	}
	return w;
fail:
	gb_protwatch__free(w);
	return NULL;
}

bool gb_protwatch__claim(struct gb_protwatch *w, pid_t tid)
{
	__u32 key = (__u32)tid;
	__u64 n = 0;

	if (!w || tid <= 0)
		return false;
	/* Only thread tid itself raises its counter, at its own syscall exit;
	 * it is stopped while its tracer claims, so read-modify-write is safe. */
	if (bpf_map_lookup_elem(w->pending_fd, &key, &n) || n == 0)
		return false;
	if (n == 1) {
		/* Keep the map to the threads with signals in flight. */
		if (bpf_map_delete_elem(w->pending_fd, &key))
			return false;
	} else {
		n--;
		if (bpf_map_update_elem(w->pending_fd, &key, &n, BPF_EXIST))
			return false;
	}
	return true;
}

int gb_protwatch__drain(struct gb_protwatch *w, gb_prot_cb cb, void *ctx)
{
	uint64_t lost;
	int err;

	if (!w)
		return 0;
	w->cb = cb;
	w->cb_ctx = ctx;
	w->delivered = 0;
	err = ring_buffer__consume(w->rb);
	w->cb = NULL;
	if (err < 0)
		return err;
	/* Changes the kernel could not record: the whole range may have
	 * changed, so ask for a re-read of all of it. */
	lost = __atomic_load_n(&w->skel->bss->lost, __ATOMIC_ACQUIRE);
	if (lost != w->lost_seen) {
		struct gb_prot_change c = {
			.tid = 0, .nr = 0, .addr = w->start, .len = w->end - w->start,
			.prot = GB_PROT_REREAD,
		};
		w->lost_seen = lost;
		w->delivered++;
		if (cb)
			cb(ctx, &c);
	}
	return w->delivered;
}

void gb_protwatch__free(struct gb_protwatch *w)
{
	if (!w)
		return;
	bpf_link__destroy(w->link);
	ring_buffer__free(w->rb);
	protwatch_bpf__destroy(w->skel);
	free(w);
}
