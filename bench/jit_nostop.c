/* The stop-free mode in one process (user/jit, docs/trace.md "A trap
 * without stops (in progress)"): fnv, an FNV-1a hash of a 5-byte key (35
 * instructions a call), is patched at its entry by the patch planner's
 * plan and called CALLS times the ordinary way, running through the cache
 * while a consumer thread drains the ring (gebpf's part, minus writing
 * lines); then the same calls natively.  Interleaved REPS times, medians.
 * A third run makes SOLO calls (default 20000: one pass of the ring holds
 * their records) with no consumer: the translated code's own cost.
 *
 * CHECK gives the entry block the owner check (user/jit/owner.c) in its
 * rdfsbase form or its fs:0 form (CPUs that hide FSGSBASE), or none.
 *
 *   jit_nostop [CALLS [REPS [none|rdfsbase|fs0]]]
 *                                  prints key=value lines; exit 1 when a
 *                                  record is missing or a result differs
 */
#include <asm/prctl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit/patch.h"

extern uint8_t fnv[], fnv_end[];
__asm__(
	".text\n"
	".p2align 12\n"
	".globl fnv, fnv_end\n"
	"fnv:\n"
	"	movabs $0xcbf29ce484222325, %rax\n"
	"	movabs $0x100000001b3, %r8\n"
	"	test %rsi, %rsi\n"
	"	jz 2f\n"
	"1:	movzbl (%rdi), %ecx\n"
	"	xor %rcx, %rax\n"
	"	imul %r8, %rax\n"
	"	inc %rdi\n"
	"	dec %rsi\n"
	"	jnz 1b\n"
	"2:	ret\n"
	"fnv_end:\n"
	".p2align 12\n");
#define KEY_LEN 5
#define INSNS_PER_CALL (4 + 6 * KEY_LEN + 1)

static struct gb_jit *jit;
static volatile int done;
static size_t consumed;

static const struct gb_insn *fetch(void *ctx, uint64_t pc)
{
	static struct gb_insn in[64];
	static unsigned k;
	struct gb_insn *out = &in[k++ % 64];
	return gb_decode(pc, (const uint8_t *)pc, GB_INSN_MAX_LEN, out) ? NULL : out;
}

static void *consume(void *arg)
{
	struct gb_jit_cursor cur = { 0 };
	struct gb_jit_rec rec;
	(void)arg;
	for (;;) {
		int r;
		size_t got = 0;
		while ((r = gb_jit__ring_poll(jit, &cur, &rec)) == 1) {
			got += rec.kind == GB_JIT_REC_INSN; /* (each call's stretch marker aside) */
			if (got % 4096 == 0)
				gb_jit__ring_commit(jit, &cur);
		}
		if (r < 0)
			return (void *)1;
		gb_jit__ring_commit(jit, &cur);
		consumed += got;
		if (done && !got)
			return NULL;
		if (!got)
			gb_jit__ring_wait(jit, 1);
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t run(long calls, double *secs)
{
	static const uint8_t key[KEY_LEN] = "gebpf";
	uint64_t (*volatile f)(const uint8_t *, long) = (uint64_t (*)(const uint8_t *, long))fnv;
	uint64_t x = 0;
	double t0 = now();
	for (long c = 0; c < calls; c++)
		x += f(key, KEY_LEN);
	*secs = now() - t0;
	return x;
}

/* The owner check's reads (gb_jit_opts.read): this process's memory. */
static int read_self(void *ctx, uint64_t addr, void *buf, size_t n)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, n);
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	const char *check = argc > 3 ? argv[3] : "none";
	bool rdfs = !strcmp(check, "rdfsbase"), fs0 = !strcmp(check, "fs0");
	if (calls <= 0 || reps <= 0 || reps > 64 || (!rdfs && !fs0 && strcmp(check, "none"))) {
		fprintf(stderr, "usage: jit_nostop [CALLS [REPS [none|rdfsbase|fs0]]]\n");
		return 2;
	}
	if (rdfs && !(getauxval(AT_HWCAP2) & (1 << 1))) {
		fprintf(stderr, "gebpf: jit_nostop: no FSGSBASE here (rdfsbase would fault)\n");
		return 2;
	}
	uint64_t f = (uint64_t)fnv, len = (uint64_t)(fnv_end - fnv);
	uint64_t near = (f & ~0xfffffull) + (256ull << 20);
	void *p = MAP_FAILED;
	for (int k = 0; k < 64 && p == MAP_FAILED; k++, near += 64ull << 20)
		p = mmap((void *)near, GB_JIT_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED || mprotect(fnv, 4096, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		perror("gebpf: jit_nostop: mmap/mprotect");
		return 1;
	}
	struct gb_jit_mem m = { p, (uint8_t *)p + GB_JIT_CODE_SIZE, (uint64_t)p,
				(uint64_t)p + GB_JIT_CODE_SIZE };
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = 1000, .owner_check = rdfs || fs0,
				 .owner_tcb = fs0, .read = read_self };
	unsigned long fs = 0;
	jit = gb_jit__new_opts(&m, f, f + len - 1, &o);
	if (!jit || syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 0)) ||
	    syscall(SYS_arch_prctl, ARCH_GET_FS, &fs)) {
		fprintf(stderr, "gebpf: jit_nostop: no cache\n");
		return 1;
	}
	gb_jit__area_fs(jit, 0, fs); /* (this thread: the owner) */
	struct gb_insn in[32];
	size_t nin = 0;
	for (uint64_t a = f; a < f + len; a += in[nin++].len)
		if (nin == 32 || gb_decode(a, (const uint8_t *)a, f + len - a, &in[nin]))
			return 1;
	uint64_t entry = f;
	struct gb_patch_map map = { f, f + 4096, false };
	struct gb_patch_in pi = { f, f + len - 1, &entry, 1, in, nin, &map, 1, m.code_addr,
				  m.code_addr + GB_JIT_CODE_SIZE };
	struct gb_patch_plan pl;
	uint64_t eb = gb_jit__entry(jit, f, fetch, NULL);
	if (gb_patch_plan(&pi, &pl) || pl.v[0].why != GB_PATCH_OK || !eb ||
	    gb_jit__translate_from(jit, f, fetch, NULL) || gb_patch_set_target(&pl.v[0], eb)) {
		fprintf(stderr, "gebpf: jit_nostop: cannot patch fnv\n");
		return 1;
	}
	long solo = calls < 20000 ? calls : 20000;
	double tn[64], tj[64], ts[64];
	uint64_t want = 0, got = 0;
	for (int r = 0; r < reps; r++) {
		memcpy(fnv, pl.v[0].orig, GB_PATCH_LEN);
		want = run(calls, &tn[r]);
		memcpy(fnv, pl.v[0].bytes, GB_PATCH_LEN);
		gb_jit__ring_reset(jit);
		done = 0;
		consumed = 0;
		pthread_t th;
		pthread_create(&th, NULL, consume, NULL);
		got = run(calls, &tj[r]);
		done = 1;
		void *rv;
		pthread_join(th, &rv);
		struct gb_jit_ring_state st;
		gb_jit__ring_state(jit, &st);
		if (rv || got != want || st.dropping || consumed != (size_t)calls * INSNS_PER_CALL) {
			fprintf(stderr, "gebpf: jit_nostop: rep %d: result %s, %zu records of %ld%s\n", r,
				got == want ? "native" : "wrong", consumed, calls * INSNS_PER_CALL,
				st.dropping ? ", dropping" : "");
			return 1;
		}
		gb_jit__ring_reset(jit);
		got = run(solo, &ts[r]);
		size_t pos = 0, n = 0;
		struct gb_jit_rec rec;
		while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
			n += rec.kind == GB_JIT_REC_INSN;
		if (n != (size_t)solo * INSNS_PER_CALL) {
			fprintf(stderr, "gebpf: jit_nostop: solo: %zu records of %ld\n", n,
				solo * INSNS_PER_CALL);
			return 1;
		}
	}
	memcpy(fnv, pl.v[0].orig, GB_PATCH_LEN);
	qsort(tn, (size_t)reps, sizeof(double), cmp_d);
	qsort(tj, (size_t)reps, sizeof(double), cmp_d);
	qsort(ts, (size_t)reps, sizeof(double), cmp_d);
	double n = tn[reps / 2], j = tj[reps / 2], insns = (double)calls * INSNS_PER_CALL;
	struct gb_jit_stats js;
	gb_jit__stats(jit, &js);
	if ((rdfs || fs0) && js.owner_checks != js.entries) {
		fprintf(stderr, "gebpf: jit_nostop: the owner check in %llu of %llu entry blocks\n",
			(unsigned long long)js.owner_checks, (unsigned long long)js.entries);
		return 1;
	}
	printf("calls=%ld insns_per_call=%d reps=%d check=%s\n", calls, INSNS_PER_CALL, reps, check);
	printf("native_s=%.6f jit_s=%.6f\n", n, j);
	printf("native_insns_per_s=%.0f jit_insns_per_s=%.0f\n", insns / n, insns / j);
	printf("per_call_ns_native=%.1f per_call_ns_jit=%.1f overhead_ns_per_call=%.1f\n",
	       n / calls * 1e9, j / calls * 1e9, (j - n) / calls * 1e9);
	printf("slowdown=%.2f\n", j / n);
	double sj = ts[reps / 2], sn = n * (double)solo / (double)calls;
	printf("solo_calls=%ld solo_jit_insns_per_s=%.0f solo_per_call_ns_jit=%.1f "
	       "solo_overhead_ns_per_call=%.1f\n", solo, (double)solo * INSNS_PER_CALL / sj,
	       sj / solo * 1e9, (sj - sn) / solo * 1e9);
	gb_patch_plan_free(&pl);
	gb_jit__free(jit);
	return 0;
}
