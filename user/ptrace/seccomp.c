/* A thread's seccomp state, and what it does to a system call: see seccomp.h. */
#include "ptrace/seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "ptrace/procfs.h"

#define MAX_FILTERS 512          /* the kernel's MAX_INSNS_PER_PATH bounds far fewer */

struct prog {
	struct sock_filter *insns;
	unsigned short len;
};

struct gb_seccomp {
	int mode;
	struct prog *progs;          /* index 0: the most recently installed */
	size_t n;
};

static int read_filters(pid_t tid, struct gb_seccomp *s)
{
	s->progs = calloc(MAX_FILTERS, sizeof(*s->progs));
	if (!s->progs)
		return -ENOMEM;
	for (unsigned long i = 0; i < MAX_FILTERS; i++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)i, NULL);
		if (n < 0 && errno == ENOENT && i > 0)
			return 0; /* past the oldest */
		if (n <= 0 || n > BPF_MAXINSNS)
			return n < 0 ? -errno : -EIO;
		struct sock_filter *f = calloc((size_t)n, sizeof(*f));
		if (!f)
			return -ENOMEM;
		s->progs[s->n].insns = f;
		s->progs[s->n++].len = (unsigned short)n;
		if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)i, f) != n)
			return errno ? -errno : -EIO;
	}
	return -E2BIG;
}

int gb_seccomp__read(pid_t tid, int *mode, struct gb_seccomp **out)
{
	int nf;
	*out = NULL;
	int r = gb_proc_seccomp(tid, mode, &nf);
	if (r || *mode == 0)
		return r;
	struct gb_seccomp *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->mode = *mode;
	r = *mode == SECCOMP_MODE_FILTER ? read_filters(tid, s) : 0;
	if (r) {
		gb_seccomp__free(s);
		return r;
	}
	*out = s;
	return 0;
}

/* One classic BPF program over d, as the kernel runs a seccomp filter
 * (the instructions seccomp_check_filter admits).  Anything malformed, and
 * a division by zero, gives 0: SECCOMP_RET_KILL_THREAD, as the kernel's. */
static uint32_t run(const struct prog *p, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	for (unsigned pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->insns[pc];
		uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? x : k;
		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;
			if (BPF_MODE(f->code) == BPF_ABS && BPF_SIZE(f->code) == BPF_W &&
			    k % 4 == 0 && k + 4 <= sizeof(*d))
				memcpy(&v, (const char *)d + k, 4);
			else if (BPF_MODE(f->code) == BPF_LEN)
				v = sizeof(*d);
			else if (BPF_MODE(f->code) == BPF_IMM)
				v = k;
			else if (BPF_MODE(f->code) == BPF_MEM && k < BPF_MEMWORDS)
				v = mem[k];
			else
				return 0;
			*(BPF_CLASS(f->code) == BPF_LD ? &a : &x) = v;
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return 0;
			mem[k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(f->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV: if (!src) return 0; a /= src; break;
			case BPF_MOD: if (!src) return 0; a %= src; break;
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default: return 0;
			}
			break;
		case BPF_JMP: {
			bool t;
			if (BPF_OP(f->code) == BPF_JA) {
				pc += k;
				break;
			}
			switch (BPF_OP(f->code)) {
			case BPF_JEQ: t = a == src; break;
			case BPF_JGT: t = a > src; break;
			case BPF_JGE: t = a >= src; break;
			case BPF_JSET: t = (a & src) != 0; break;
			default: return 0;
			}
			pc += t ? f->jt : f->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? a : k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return 0;
		}
	}
	return 0; /* fell off the end: the kernel's checker refuses such a filter */
}

uint32_t gb_seccomp__action(const struct gb_seccomp *s, long nr, const uint64_t args[6],
			    uint64_t ip)
{
	if (!s)
		return SECCOMP_RET_ALLOW;
	if (s->mode == SECCOMP_MODE_STRICT)
		return nr == SYS_read || nr == SYS_write || nr == SYS_exit || nr == SYS_rt_sigreturn ?
		       SECCOMP_RET_ALLOW : SECCOMP_RET_KILL_THREAD;
	struct seccomp_data d = { .nr = (int)nr, .arch = AUDIT_ARCH_X86_64,
				  .instruction_pointer = ip };
	memcpy(d.args, args, sizeof(d.args));
	/* Every filter runs; the lowest action (as a signed value: KILL_PROCESS
	 * first) wins, the most recent filter's among equals. */
	uint32_t ret = SECCOMP_RET_ALLOW;
	for (size_t i = 0; i < s->n; i++) {
		uint32_t cur = run(&s->progs[i], &d);
		if ((int32_t)(cur & SECCOMP_RET_ACTION_FULL) < (int32_t)(ret & SECCOMP_RET_ACTION_FULL))
			ret = cur;
	}
	return ret;
}

const char *gb_seccomp_action_name(uint32_t action, char *buf, size_t len)
{
	switch (action & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_KILL_PROCESS: return "kill the process";
	case SECCOMP_RET_KILL_THREAD: return "kill the thread";
	case SECCOMP_RET_TRAP: return "send SIGSYS";
	case SECCOMP_RET_ERRNO:
		snprintf(buf, len, "fail it with errno %u", action & SECCOMP_RET_DATA);
		return buf;
	case SECCOMP_RET_USER_NOTIF: return "hand it to a supervisor";
	case SECCOMP_RET_TRACE: return "hand it to a seccomp tracer";
	case SECCOMP_RET_LOG: return "log and allow it";
	case SECCOMP_RET_ALLOW: return "allow it";
	default: return "refuse it";
	}
}

void gb_seccomp__free(struct gb_seccomp *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->progs[i].insns);
	free(s->progs);
	free(s);
}
