/* Harness of the probe-trap tests: pt_util.h. */
#include "pt_util.h"

#include <criterion/criterion.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/maps.h"

void pt_need(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for uprobes and BPF (CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON)");
	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0 &&
	    access("/sys/kernel/tracing/uprobe_events", W_OK) != 0)
		cr_skip_test("kernel has no uprobes (no uprobe PMU, no tracefs uprobe_events)");
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		cr_skip_test("kernel has no BTF (the probe trap reads task_struct with CO-RE)");
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_send_signal_thread, NULL) != 1)
		cr_skip_test("kernel lacks bpf_send_signal_thread (Linux 5.5)");
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
		cr_skip_test("kernel lacks BPF ring buffers (Linux 5.8)");
}

void pt_run_init(struct pt_run *r)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
}

void pt_probe_file(struct pt_run *r, const char *path, uint64_t off)
{
	cr_assert(r->nprobes < PT_MAXPROBES);
	snprintf(r->probe[r->nprobes].path, sizeof(r->probe[0].path), "%s", path);
	r->probe[r->nprobes].off = off;
	r->nprobes++;
}

void pt_probe_self(struct pt_run *r, uint64_t addr)
{
	struct gb_maps m = { 0 };
	const struct gb_map *mp;

	cr_assert_eq(gb_maps_read(getpid(), &m), 0);
	mp = gb_maps_find(&m, addr);
	cr_assert(mp && mp->path[0] == '/', "%#lx is not in a mapped file", (unsigned long)addr);
	pt_probe_file(r, mp->path, addr - mp->start + mp->offset);
	gb_maps_free(&m);
}

static void getsig(pid_t pid, int *sig, siginfo_t *si)
{
	memset(si, 0, sizeof(*si));
	cr_assert(ptrace(PTRACE_GETSIGINFO, pid, 0, si) == 0, "GETSIGINFO: %s", strerror(errno));
	*sig = si->si_signo;
}

/* Single-step pid from the stop in *s until rip == r->step_until. */
static void step_stretch(struct pt_run *r, pid_t pid, struct gb_probetrap *p,
			 const struct pt_stop *s)
{
	struct user_regs_struct regs = s->regs;
	int status, sig;
	siginfo_t si;

	gb_probetrap__set_stepping(p, pid, true);
	while (regs.rip != r->step_until) {
		cr_assert(r->nsteps < PT_MAXSTEPS, "no end of the stepped stretch");
		struct pt_step *st = &r->steps[r->nsteps++];
		st->rip_before = regs.rip;
		cr_assert(ptrace(PTRACE_SINGLESTEP, pid, 0, 0) == 0);
		cr_assert(waitpid(pid, &status, __WALL) == pid);
		cr_assert(WIFSTOPPED(status) && (status >> 16) == 0,
			  "step from %#lx: status %#x", (unsigned long)st->rip_before, status);
		getsig(pid, &sig, &si);
		cr_assert(ptrace(PTRACE_GETREGS, pid, 0, &regs) == 0);
		st->rip_after = regs.rip;
		st->regs = regs;
		st->sig = sig;
		st->code = si.si_code;
		st->from_pid = si.si_pid;
		st->artifact = gb_probetrap__is_step_artifact(p, pid, st->rip_before, sig, &si);
		cr_assert_eq(sig, SIGTRAP, "step from %#lx stopped with signal %d",
			     (unsigned long)st->rip_before, sig);
	}
	gb_probetrap__set_stepping(p, pid, false);
}

pid_t pt_fork_gated(void (*fn)(void *), void *arg, unsigned ptrace_opts, int *gate)
{
	int fds[2];
	char b;

	signal(SIGPIPE, SIG_IGN);
	cr_assert(pipe(fds) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(fds[1]);
		if (read(fds[0], &b, 1) != 1)
			_exit(90);
		fn(arg);
		_exit(0);
	}
	close(fds[0]);
	cr_assert(ptrace(PTRACE_SEIZE, pid, 0, ptrace_opts) == 0, "PTRACE_SEIZE %d: %s", pid,
		  strerror(errno));
	*gate = fds[1];
	return pid;
}

void pt_gate_open(int gate)
{
	cr_assert(write(gate, "g", 1) == 1);
	close(gate);
}

void pt_run(struct pt_run *r, void (*fn)(void *), void *arg)
{
	int gate, status;
	pid_t pid = pt_fork_gated(fn, arg, r->ptrace_opts, &gate);
	struct gb_probetrap *p;
	p = gb_probetrap__new(&(struct gb_probetrap_opts){
		.tgid = pid, .signo = r->signo });
	if (!p)
		kill(pid, SIGKILL);
	cr_assert_not_null(p, "gb_probetrap__new failed (see stderr)");
	for (int i = 0; i < r->nprobes; i++) {
		int err = gb_probetrap__add(p, r->probe[i].path, r->probe[i].off);
		if (err)
			kill(pid, SIGKILL);
		cr_assert_eq(err, 0, "add %s+%#lx: %s", r->probe[i].path,
			     (unsigned long)r->probe[i].off, strerror(-err));
	}
	r->trap = p;
	if (r->before_gate)
		r->before_gate(r, pid);
	p = r->trap;                    /* the hook may have freed it */
	pt_gate_open(gate);

	for (;;) {
		pid_t t = waitpid(-1, &status, __WALL);
		cr_assert(t > 0, "waitpid: %s", strerror(errno));
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (t != pid)
				continue;      /* a traced child's child (fork options) */
			r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			r->term_sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
			break;
		}
		cr_assert(WIFSTOPPED(status));
		if (status >> 16) {
			/* a ptrace event or a group-stop: resume */
			cr_assert(ptrace(PTRACE_CONT, t, 0, 0) == 0);
			continue;
		}
		struct pt_stop spare, *s = r->nstops < PT_MAXSTOPS ? &r->stops[r->nstops] : &spare;
		r->nstops++;      /* only the first PT_MAXSTOPS are kept */
		memset(s, 0, sizeof(*s));
		siginfo_t si;
		int sig;
		s->tid = t;
		getsig(t, &sig, &si);
		s->sig = sig;
		s->code = si.si_code;
		s->from_pid = si.si_pid;
		cr_assert(ptrace(PTRACE_GETREGS, t, 0, &s->regs) == 0);
		if (r->drain_first && p) {
			struct pollfd pf = { .fd = gb_probetrap__poll_fd(p), .events = POLLIN };
			cr_assert_eq(poll(&pf, 1, 1000), 1, "poll fd not readable at a stop");
			int n = gb_probetrap__drain(p);
			cr_assert(n >= 0, "drain: %s", strerror(-n));
			r->drained += n;
		}
		s->claimed = gb_probetrap__claim(p, t, sig, &si, &s->hit);
		if (s->claimed)
			gb_probe_hit__complete(&s->hit, &s->regs);
		if (s->claimed && r->on_claim)
			r->on_claim(r, t, s);
		if (s->claimed && r->step_from && s->hit.addr == r->step_from)
			step_stretch(r, t, p, s);
		cr_assert(ptrace(PTRACE_CONT, t, 0, s->claimed ? 0 : sig) == 0);
	}
	gb_probetrap__stats(p, &r->stats);
	r->trap = NULL;
	gb_probetrap__free(p);
}

void pt_prog_path(const char *name, char *buf, size_t len)
{
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	cr_assert(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(buf, len, "%s/progs/%s", self, name);
	if (access(buf, R_OK))
		cr_skip_test("%s not built (make progs)", buf);
}

/* vaddr -> file offset through the PT_LOAD segment holding it. */
static uint64_t vaddr_off(Elf *e, uint64_t va)
{
	size_t n;
	GElf_Phdr ph;

	cr_assert(elf_getphdrnum(e, &n) == 0);
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && va >= ph.p_vaddr &&
		    va < ph.p_vaddr + ph.p_filesz)
			return va - ph.p_vaddr + ph.p_offset;
	cr_assert_fail("%#lx is in no PT_LOAD segment", (unsigned long)va);
	return 0;
}

static Elf *elf_open(const char *path, int *fd)
{
	elf_version(EV_CURRENT);
	*fd = open(path, O_RDONLY);
	cr_assert(*fd >= 0, "%s: %s", path, strerror(errno));
	Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
	cr_assert_not_null(e);
	return e;
}

uint64_t pt_elf_entry_off(const char *path)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	GElf_Ehdr eh;

	cr_assert_not_null(gelf_getehdr(e, &eh));
	uint64_t off = vaddr_off(e, eh.e_entry);
	elf_end(e);
	close(fd);
	return off;
}

uint64_t pt_elf_sym_off(const char *path, const char *sym)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	Elf_Scn *scn = NULL;
	uint64_t off = 0;

	while (!off && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (gelf_getsym(d, (int)i, &s) && s.st_value &&
			    !strcmp(elf_strptr(e, sh.sh_link, s.st_name), sym)) {
				off = vaddr_off(e, s.st_value);
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	cr_assert(off, "%s: no symbol %s", path, sym);
	return off;
}

long pt_legacy_uprobes(pid_t pid)
{
	const char *f = access("/sys/kernel/tracing/uprobe_events", R_OK) == 0 ?
		"/sys/kernel/tracing/uprobe_events" : "/sys/kernel/debug/tracing/uprobe_events";
	char line[1024], tag[64];
	long n = 0;
	FILE *fp = fopen(f, "r");

	if (!fp)
		return -1;
	snprintf(tag, sizeof(tag), "libbpf_%d_", (int)pid);
	while (fgets(line, sizeof(line), fp))
		if (strstr(line, tag))
			n++;
	fclose(fp);
	return n;
}
