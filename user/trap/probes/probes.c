/* The probe trap: see trap/probes/probes.h. */
#include "trap/probes/probes.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "decode/decode.h"
#include "decode/written.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "sym/entries.h"
#include "trace/cpu.h"

#define TF 0x100u /* RFLAGS' trap flag */

struct entry {
	uint64_t vaddr;            /* link-time address */
	uint64_t off;              /* file offset (the uprobe's) */
	bool pushf;                /* its instruction pushes RFLAGS (hide_step) */
};

struct gb_probes {
	bool values;             /* --values: entries must give them (gb_probes_values_lost) */
	pid_t tgid;
	char *path;
	dev_t dev;
	ino_t ino;
	uint64_t lo, hi;
	bool mapped;
	uint64_t bias;
	struct gb_probetrap *pt;
	struct entry *v;           /* sorted by vaddr */
	size_t n, cap;
};

static int cmp_probe(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static const struct entry *find_probe(const struct gb_probes *p, uint64_t vaddr)
{
	struct entry key = { .vaddr = vaddr };
	return p->n ? bsearch(&key, p->v, p->n, sizeof(*p->v), cmp_probe) : NULL;
}

/* Can the instruction at an entry be emitted exactly from the registers
 * before it, once it has run natively?  Not when its accesses depend on
 * vector registers it may change (gathers, masked moves), when it is a REP
 * string instruction (one line per iteration: the count is gone), a
 * syscall (uprobes cannot run it out of line), or a VEX/EVEX one (uprobes
 * emulate another in its place: gb_insn_vex_family). */
static const char *unrebuildable(const uint8_t *bytes, size_t len, uint64_t vaddr, bool values)
{
	struct gb_insn in;
	if (gb_decode(vaddr, bytes, len, &in))
		return "cannot be decoded";
	const char *lost = values ? gb_probes_values_lost(&in) : NULL;
	if (lost)
		return lost;
	if (in.flags & GB_INSN_NEEDS_VEC)
		return "its accesses depend on vector registers";
	if (in.flags & GB_INSN_REP)
		return "is a REP string instruction";
	if (in.flags & GB_INSN_SYSCALL)
		return "is a system call";
	if (gb_insn_vex_family(&in))
		return "is VEX/EVEX-encoded (a uprobe there runs another instruction: docs/bpf.md "
		       "\"What a uprobe runs\")";
	return NULL;
}

const char *gb_probes_values_lost(const struct gb_insn *in)
{
	struct gb_wreg w[GB_WREG_MAX];
	int n = gb_insn_written(in, w, GB_WREG_MAX);
	if (gb_insn_writes_all(in))
		return "loads the register file";
	for (int k = 0; k < n; k++)
		if (w[k].kind >= GB_WR_FS_BASE)
			return "writes a register the probe's BPF program does not see";
	bool rd = false, wr = false;
	for (int k = 0; k < in->zi.operand_count; k++) {
		const ZydisDecodedOperand *o = &in->ops[k];
		if (o->type != ZYDIS_OPERAND_TYPE_MEMORY || o->mem.type == ZYDIS_MEMOP_TYPE_AGEN ||
		    o->mem.type == ZYDIS_MEMOP_TYPE_MIB)
			continue;
		rd |= o->actions & ZYDIS_OPERAND_ACTION_MASK_READ;
		wr |= o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE;
	}
	if (rd && wr)
		return "reads and writes memory (what it read may be gone once it ran)";
	return NULL;
}

/* Does the instruction push RFLAGS (pushf, pushfq)? */
static bool pushes_flags(const uint8_t *bytes, size_t len, uint64_t vaddr)
{
	struct gb_insn in;
	return gb_decode(vaddr, bytes, len, &in) == 0 && (in.flags & GB_INSN_PUSHF);
}

static int add_probe(struct gb_probes *p, uint64_t vaddr, uint64_t off, bool pushf)
{
	if (find_probe(p, vaddr))
		return 0;
	if (GB_GROW(&p->v, &p->cap, p->n + 1))
		return -ENOMEM;
	int r = gb_probetrap__add(p->pt, p->path, off);
	if (r)
		return r;
	p->v[p->n++] = (struct entry){ .vaddr = vaddr, .off = off, .pushf = pushf };
	qsort(p->v, p->n, sizeof(*p->v), cmp_probe);
	return 0;
}

/* All of a range's entries in one call: one uprobe_multi link, whose
 * set-up and removal wait for the kernel's grace periods once, not once
 * per entry (user/probe/probetrap.h). */
static int add_probes(struct gb_probes *p, const struct gb_entries *en)
{
	uint64_t *offs = malloc((en->n ? en->n : 1) * sizeof(*offs));
	int r = offs && !GB_GROW(&p->v, &p->cap, p->n + en->n) ? 0 : -ENOMEM;
	for (size_t k = 0; !r && k < en->n; k++)
		offs[k] = en->v[k].offset;
	if (!r)
		r = gb_probetrap__add_many(p->pt, p->path, offs, en->n);
	for (size_t k = 0; !r && k < en->n; k++)
		p->v[p->n++] = (struct entry){
			.vaddr = en->v[k].vaddr, .off = en->v[k].offset,
			.pushf = pushes_flags(en->v[k].bytes, en->v[k].len, en->v[k].vaddr) };
	if (!r)
		qsort(p->v, p->n, sizeof(*p->v), cmp_probe);
	free(offs);
	return r;
}

/* The entries of en that are in only (ascending), in order. */
static void keep_only(struct gb_entries *en, const uint64_t *only, size_t n)
{
	size_t w = 0;
	for (size_t k = 0, o = 0; k < en->n; k++) {
		while (o < n && only[o] < en->v[k].vaddr)
			o++;
		if (o < n && only[o] == en->v[k].vaddr)
			en->v[w++] = en->v[k];
	}
	en->n = w;
}

struct gb_probes *gb_probes__new(const struct gb_probes_opts *o)
{
	struct gb_probes *p = calloc(1, sizeof(*p));
	struct gb_entries ents = { 0 };
	struct stat sb;
	if (!p)
		return NULL;
	p->tgid = o->tgid;
	p->values = o->values;
	p->lo = o->lo;
	p->hi = o->hi;
	p->mapped = o->mapped;
	p->bias = o->bias;
	p->path = strdup(o->path);
	if (!p->path || stat(o->path, &sb))
		goto fail;
	p->dev = sb.st_dev;
	p->ino = sb.st_ino;
	int r = gb_entries_find(o->path, o->lo, o->hi, &ents,
				o->quiet ? NULL : "probe trap: cannot find the range's entries (the page trap "
						    "traces it instead)");
	if (r)
		goto fail;
	for (size_t k = 0; k < ents.nwarn; k++)
		gb_info("probe trap: %s", ents.warn[k]);
	if (o->nonly)
		keep_only(&ents, o->only, o->nonly);
	for (size_t k = 0; k < ents.n; k++) {
		const char *why = unrebuildable(ents.v[k].bytes, ents.v[k].len, ents.v[k].vaddr,
						o->values);
		if (why) {
			if (!o->quiet)
				(o->values ? gb_info : gb_warn)("probe trap: the entry at %s+0x%llx %s%s; "
								"using the page trap", o->path,
								(unsigned long long)ents.v[k].vaddr, why,
								o->values ? " (--values)" : "");
			goto fail;
		}
	}
	struct gb_probetrap_opts po = { .tgid = o->tgid, .quiet = o->quiet,
					.redirect = o->redirect };
	p->pt = gb_probetrap__new(&po);
	if (!p->pt)
		goto fail;
	r = add_probes(p, &ents);
	if (r) {
		if (!o->quiet)
			gb_warn("probe trap: cannot probe the %zu entries in %s: %s; using the page trap",
				ents.n, o->path, strerror(-r));
		goto fail;
	}
	gb_info("probe trap: %zu entries in %s 0x%llx-0x%llx%s", p->n, o->path,
		(unsigned long long)o->lo, (unsigned long long)o->hi,
		p->mapped ? "" : " (pending: not mapped yet)");
	gb_entries_free(&ents);
	return p;
fail:
	gb_entries_free(&ents);
	gb_probes__free(p);
	return NULL;
}

void gb_probes__free(struct gb_probes *p)
{
	if (!p)
		return;
	gb_probetrap__free(p->pt);
	free(p->v);
	free(p->path);
	free(p);
}

struct gb_probetrap *gb_probes__trap(struct gb_probes *p)
{
	return p ? p->pt : NULL;
}

bool gb_probes__range(const struct gb_probes *p, uint64_t *start, uint64_t *end)
{
	if (!p->mapped)
		return false;
	*start = p->lo + p->bias;
	*end = p->hi + p->bias;
	return true;
}

/* The mapping of our file that holds run-time address addr: the file
 * offset of addr.  -ENOENT when addr is not in our file. */
static int file_offset(const struct gb_probes *p, uint64_t addr, uint64_t *off)
{
	struct gb_maps m;
	int r = gb_maps_read(p->tgid, &m);
	if (r)
		return r;
	const struct gb_map *mp = gb_maps_find(&m, addr);
	r = -ENOENT;
	if (mp && mp->inode == p->ino && makedev(mp->dev_major, mp->dev_minor) == p->dev) {
		*off = mp->offset + (addr - mp->start);
		r = 0;
	}
	gb_maps_free(&m);
	return r;
}

/* The first hit after the module was mapped: its bias. */
static void learn_bias(struct gb_probes *p, uint64_t addr)
{
	uint64_t off;
	if (file_offset(p, addr, &off))
		return;
	for (size_t k = 0; k < p->n; k++)
		if (p->v[k].off == off) {
			p->bias = addr - p->v[k].vaddr;
			p->mapped = true;
			gb_info("probe trap: %s mapped; range 0x%llx-0x%llx", p->path,
				(unsigned long long)(p->lo + p->bias),
				(unsigned long long)(p->hi + p->bias));
			return;
		}
}

/* The kernel runs a probed instruction out of line with TF set (its own
 * single-step): a pushf there pushes RFLAGS with TF = 1, which the program
 * would see.  At the probe's stop (after the instruction) the pushed copy
 * gets back the TF the program had (docs/trace.md "The probe trap").  The
 * other instructions the kernel steps out of line show nothing of it: it
 * fixes RIP-relative operands and a call's pushed return address itself
 * (tests/progs/pt_pushf). */
static void hide_step(struct gb_probes *p, pid_t tid, const struct gb_probe_hit *hit)
{
	const struct entry *e = p->mapped ? find_probe(p, hit->addr - p->bias) : NULL;
	struct user_regs_struct r;
	uint16_t w;
	if (!e || !e->pushf || (hit->regs.eflags & TF) || gb_regs_get(tid, &r))
		return;
	/* Only when it pushed (not a pushf that faulted on the stack: its
	 * signal comes first, with nothing pushed): 8 bytes, 2 with 0x66. */
	uint64_t pushed = hit->regs.rsp - r.rsp;
	if ((pushed != 8 && pushed != 2) || gb_mem_read(tid, r.rsp, &w, sizeof(w)) != sizeof(w) ||
	    !(w & TF))
		return;
	w &= (uint16_t)~TF;
	gb_mem_write(tid, r.rsp, &w, sizeof(w));
}

int gb_probe_hit__accesses(struct gb_probe_hit *hit, const struct user_regs_struct *now,
			   const struct gb_insn *in, struct gb_access *acc, int max)
{
	struct gb_cpu cpu;
	/* The BPF program saw the registers before the instruction; the
	 * segment bases cannot have changed since (entries are checked). */
	gb_probe_hit__complete(hit, now);
	gb_cpu_from_regs(&cpu, &hit->regs);
	return gb_insn_accesses(in, &cpu, acc, max);
}

static siginfo_t stop_siginfo(const struct gb_stop *st)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = st->sig;
	si.si_code = st->code;
	si.si_pid = st->sender;
	return si;
}

bool gb_probes__claim(struct gb_probes *p, const struct gb_stop *st, struct gb_probe_hit *hit)
{
	siginfo_t si = stop_siginfo(st);
	if (st->kind != GB_STOP_SIGNAL || !gb_probetrap__claim(p->pt, st->tid, st->sig, &si, hit))
		return false;
	if (hit->flags & GB_PROBE_HIT_TAKEN)
		return true; /* its hit was taken already: a signal to swallow */
	if (hit->flags & GB_PROBE_HIT_LOST) {
		gb_err("probe trap: thread %d: a probe's record was lost (ring buffer full): the "
		       "trace would miss an instruction", st->tid);
	}
	if (!p->mapped)
		learn_bias(p, hit->addr);
	hide_step(p, st->tid, hit);
	return true;
}

bool gb_probes__take_early(struct gb_probes *p, const struct gb_stop *st, struct gb_probe_hit *hit)
{
	if (!gb_probetrap__take_early(p->pt, st->tid, hit))
		return false;

	if (!p->mapped)
		learn_bias(p, hit->addr);
	hide_step(p, st->tid, hit);
	return true;
}

bool gb_probes__step_artifact(struct gb_probes *p, const struct gb_stop *st, uint64_t pc)
{
	siginfo_t si = stop_siginfo(st);
	return st->kind == GB_STOP_SIGNAL &&
	       gb_probetrap__is_step_artifact(p->pt, st->tid, pc, st->sig, &si);
}

void gb_probes__stepping(struct gb_probes *p, pid_t tid, bool on)
{
	gb_probetrap__set_stepping(p->pt, tid, on);
}

int gb_probes__add_entry(struct gb_probes *p, uint64_t addr)
{
	uint64_t off;
	if (!p->mapped || addr < p->lo + p->bias || addr > p->hi + p->bias)
		return -EINVAL;
	if (find_probe(p, addr - p->bias))
		return 0;
	uint8_t b[16];
	ssize_t n = gb_mem_read(p->tgid, addr, b, sizeof(b));
	int r = n > 0 ? file_offset(p, addr, &off) : -EFAULT;
	if (r)
		return r;
	gb_probetrap__orig_bytes(p->pt, addr, b, (size_t)n);
	struct gb_insn in;
	const char *lost = p->values && gb_decode(addr, b, (size_t)n, &in) == 0 ?
			   gb_probes_values_lost(&in) : NULL;
	if (lost) {
		gb_err("probe trap: a handler returns into the range at 0x%llx, whose instruction %s: "
		       "--values cannot be exact from there under the probe trap (--trap pages)",
		       (unsigned long long)addr, lost);
		return -ENOTSUP;
	}
	r = add_probe(p, addr - p->bias, off, pushes_flags(b, (size_t)n, addr));
	if (!r)
		gb_info("probe trap: entry added at 0x%llx (a handler's return into the range)",
			(unsigned long long)addr);
	return r;
}

void gb_probes__patch(void *ctx, uint64_t addr, uint8_t *buf, size_t len)
{
	struct gb_probes *p = ctx;
	gb_probetrap__orig_bytes(p->pt, addr, buf, len);
}

int gb_probes__exec(struct gb_probes *p, pid_t from)
{
	p->mapped = false;
	p->bias = 0;
	gb_probetrap__maps_changed(p->pt);
	if (from == p->tgid)
		return 0;
	/* What the killed main thread left under the pid, now the exec'ing
	 * thread's, and what that one left under its old tid. */
	gb_probetrap__forget(p->pt, p->tgid);
	gb_probetrap__forget(p->pt, from);
	return gb_probetrap__reattach(p->pt);
}

void gb_probes__forget(struct gb_probes *p, pid_t tid)
{
	gb_probetrap__forget(p->pt, tid);
}
