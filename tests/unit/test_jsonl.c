/* The trace JSONL writer (user/record/jsonl.c over record/lines.c) against
 * docs/trace-format.md: byte-exact lines, the budget and its summary, and
 * the writer discipline (whole lines, summary last, never a blocked tracer). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "record/jsonl.h"
#include "record/linefmt.h"
#include "record/numfmt.h"

static int memfile(void)
{
	int fd = memfd_create("jsonl", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	return fd;
}

/* The whole file as a string (caller frees). */
static char *slurp(int fd)
{
	struct stat st;
	cr_assert(fstat(fd, &st) == 0);
	char *s = calloc(1, (size_t)st.st_size + 1);
	cr_assert(pread(fd, s, (size_t)st.st_size, 0) == st.st_size);
	return s;
}

/* finish() succeeds and the file is exactly want. */
static void expect_file(struct gb_jsonl *w, int fd, const char *want)
{
	cr_assert_eq(gb_jsonl__finish(w), 0);
	char *s = slurp(fd);
	cr_assert_str_eq(s, want);
	free(s);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

Test(jsonl, lines_byte_exact)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true, .has_start = true, .has_end = true,
				   .start = 0x401000, .end = 0x401fff, .faults = true };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	cr_assert(w);
	gb_jsonl__exec(w, 0, 0x401000, 0);
	gb_jsonl__mem(w, false, 0, 0x4c6f20, 8, 0x401004, 1);
	gb_jsonl__mem(w, true, 1, 0x7ffe3a10, 8, 0x401008, 2);
	gb_jsonl__fault(w, 1, 0x7f12a000, 0x401008, 0x6, 2);
	gb_jsonl__mem(w, false, 12, 0, 512, 0xffffffffffffffffull, 18446744073709551615ull);
	expect_file(w, fd,
		"{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x401000\",\"vt\":0}\n"
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x4c6f20\",\"size\":8,\"pc\":\"0x401004\",\"vt\":1}\n"
		"{\"t\":\"write\",\"vcpu\":1,\"addr\":\"0x7ffe3a10\",\"size\":8,\"pc\":\"0x401008\",\"vt\":2}\n"
		"{\"t\":\"fault\",\"vcpu\":1,\"addr\":\"0x7f12a000\",\"pc\":\"0x401008\",\"err\":\"0x6\",\"vt\":2}\n"
		"{\"t\":\"read\",\"vcpu\":12,\"addr\":\"0x0\",\"size\":512,\"pc\":\"0xffffffffffffffff\","
		"\"vt\":18446744073709551615}\n"
		"{\"t\":\"summary\",\"insns\":1,\"mem\":3,\"events\":5,\"dropped\":0,\"exec\":true,"
		"\"start\":\"0x401000\",\"end\":\"0x401fff\",\"faults\":1}\n");
	gb_jsonl__free(w);
}

/* Budget 2, an instruction with two reads: the exec line and the first read
 * are written, the second read is dropped; every later line is dropped too,
 * but counted in insns/mem/events. */
Test(jsonl, budget_hit_inside_an_instruction)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true, .max_events = 2 };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	gb_jsonl__exec(w, 0, 0x1000, 0);
	gb_jsonl__mem(w, false, 0, 0x2000, 8, 0x1000, 0);
	gb_jsonl__mem(w, false, 0, 0x3000, 4, 0x1000, 0);
	gb_jsonl__exec(w, 0, 0x1004, 1);
	gb_jsonl__mem(w, true, 0, 0x2000, 8, 0x1004, 1);
	expect_file(w, fd,
		"{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1000\",\"vt\":0}\n"
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x2000\",\"size\":8,\"pc\":\"0x1000\",\"vt\":0}\n"
		"{\"t\":\"summary\",\"insns\":2,\"mem\":3,\"events\":5,\"dropped\":3,\"exec\":true,"
		"\"start\":null,\"end\":null}\n");
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.insns, 2);
	cr_assert_eq(c.reads, 2);
	cr_assert_eq(c.writes, 1);
	cr_assert_eq(c.events, 5);
	cr_assert_eq(c.dropped, 3);
	gb_jsonl__free(w);
}

/* --max-events 0 is unlimited. */
Test(jsonl, max_events_zero_is_unlimited)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true, .max_events = 0 };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	for (uint64_t i = 0; i < 100000; i++)
		gb_jsonl__exec(w, 0, 0x1000 + i, i);
	cr_assert_eq(gb_jsonl__finish(w), 0);
	char *s = slurp(fd);
	size_t lines = 0;
	for (char *p = s; *p; p++)
		lines += *p == '\n';
	cr_assert_eq(lines, 100001);
	cr_assert(strstr(s, "{\"t\":\"summary\",\"insns\":100000,\"mem\":0,\"events\":100000,"
			    "\"dropped\":0,\"exec\":true,\"start\":null,\"end\":null}\n"));
	free(s);
	gb_jsonl__free(w);
}

/* The writer keeps the end of the last line (`,"pc":..,"vt":N}`) and
 * increments vt's digits when the next line's vt is one more: every kind of
 * step (the same pc and vt again, vt + 1 across 9 -> 10 and 999 -> 1000, a
 * jump back, UINT64_MAX -> 0, batch mode on and off) against snprintf. */
Test(jsonl, cached_line_ends_match_printf)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true, .max_events = 0 };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	size_t cap = 1 << 22, len = 0;
	char *want = malloc(cap);
	/* (the decimal counter's carries: within its first word, into its second
	 * at 8 digits, out of it at 16, and formatted each time past it) */
	static const uint64_t starts[] = { 0, 7, 95, 998, 99999, 1000000 - 3, 42, 9999999999ull,
					   UINT64_MAX - 2, 3, 99999995, 1234567890123455ull,
					   9999999999999995ull, 99999999999999995ull, 5 };
	uint64_t pc = 0x401000;
	for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++) {
		gb_jsonl__batch(w, s % 2 == 1);
		for (uint64_t k = 0; k < 12; k++) {
			uint64_t vt = starts[s] + k;
			pc = k % 3 ? pc + k : pc;
			unsigned vcpu = (unsigned)(k % 4 == 3 ? 10 + k : k % 2);
			gb_jsonl__exec(w, vcpu, pc, vt);
			len += (size_t)snprintf(want + len, cap - len,
						"{\"t\":\"exec\",\"vcpu\":%u,\"pc\":\"0x%llx\",\"vt\":%llu}\n",
						vcpu, (unsigned long long)pc, (unsigned long long)vt);
			for (unsigned a = 0; a < k % 3; a++) {
				uint64_t addr = a ? 0x7ffe3a10 + k : k;
				unsigned size = a ? 16 : 8;
				gb_jsonl__mem(w, a == 1, vcpu, addr, size, pc, vt);
				len += (size_t)snprintf(want + len, cap - len,
							"{\"t\":\"%s\",\"vcpu\":%u,\"addr\":\"0x%llx\",\"size\":%u,"
							"\"pc\":\"0x%llx\",\"vt\":%llu}\n",
							a == 1 ? "write" : "read", vcpu,
							(unsigned long long)addr, size,
							(unsigned long long)pc, (unsigned long long)vt);
			}
		}
	}
	gb_jsonl__batch(w, false);
	cr_assert_eq(gb_jsonl__finish(w), 0);
	char *s = slurp(fd);
	char *sum = strstr(s, "{\"t\":\"summary\"");
	cr_assert(sum);
	*sum = 0;
	cr_assert_str_eq(s, want);
	free(s);
	free(want);
	gb_jsonl__free(w);
}

/* --exec off: no exec lines, insns 0, the access lines and their counts stay. */
Test(jsonl, exec_off)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = false, .has_start = true, .start = 0x10,
				   .max_events = 1 };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	for (uint64_t vt = 0; vt < 3; vt++) {   /* the middle instruction has no access */
		gb_jsonl__exec(w, 0, 0x10 + 2 * vt, vt);
		if (vt != 1)
			gb_jsonl__mem(w, vt == 0, 0, 0x2000, 2, 0x10 + 2 * vt, vt);
	}
	expect_file(w, fd,
		"{\"t\":\"write\",\"vcpu\":0,\"addr\":\"0x2000\",\"size\":2,\"pc\":\"0x10\",\"vt\":0}\n"
		"{\"t\":\"summary\",\"insns\":0,\"mem\":2,\"events\":2,\"dropped\":1,\"exec\":false,"
		"\"start\":\"0x10\",\"end\":null}\n");
	gb_jsonl__free(w);
}

/* A full disk (RLIMIT_FSIZE stands in for it): the file keeps whole lines
 * only, the summary is the last line, written + dropped = events. */
Test(jsonl, full_disk_whole_lines_summary_last)
{
	signal(SIGXFSZ, SIG_IGN);
	char path[] = "/tmp/gebpf-jsonl-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	struct rlimit rl = { 1000, 1000 };
	cr_assert(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	struct gb_jsonl_opts o = { .exec = true };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	for (uint64_t i = 0; i < 200; i++) {
		gb_jsonl__exec(w, 0, 0x401000 + i, i);
		gb_jsonl__mem(w, false, 0, 0x7ffe0000 + i, 8, 0x401000 + i, i);
	}
	cr_assert_eq(gb_jsonl__finish(w), -EFBIG);
	cr_assert_eq(gb_jsonl__error(w), -EFBIG);
	char *s = slurp(fd);
	size_t n = strlen(s);
	cr_assert(n > 0 && n <= 1000 && s[n - 1] == '\n', "torn file: %zu bytes", n);
	uint64_t lines = 0;
	char *last = s;
	for (char *p = s; *p; p++)
		if (*p == '\n') {
			lines++;
			if (p[1])
				last = p + 1;
		}
	cr_assert(!strncmp(last, "{\"t\":\"summary\"", 14), "last line: %s", last);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.events, 400);
	cr_assert_eq(c.events - c.dropped, lines - 1);
	char want[128];
	snprintf(want, sizeof(want), "\"events\":400,\"dropped\":%llu,", (unsigned long long)c.dropped);
	cr_assert(strstr(last, want), "%s", last);
	free(s);
	gb_jsonl__free(w);
}

/* What was traced reaches the file within a second, with no flush call (a
 * SIGKILLed gebpf leaves it). */
Test(jsonl, written_without_flush_within_a_second)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	gb_jsonl__exec(w, 0, 0x1000, 0);
	double t0 = now();
	struct stat st = { 0 };
	while (now() - t0 < 1.0 && (fstat(fd, &st), st.st_size == 0))
		usleep(10000);
	cr_assert_eq(st.st_size, (off_t)strlen("{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1000\",\"vt\":0}\n"));
	gb_jsonl__free(w);
}

/* A pipe nobody reads: the tracer is held while the buffer is full, only
 * until `duration`; then lines are dropped, the writer reports a stall, and
 * finish() returns -EAGAIN within about a second; the pipe holds whole lines. */
Test(jsonl, stalled_pipe_gives_up_after_duration)
{
	int p[2];
	cr_assert(pipe(p) == 0);
	struct gb_jsonl_opts o = { .exec = true, .duration = 0.5 };
	struct gb_jsonl *w = gb_jsonl__new(p[1], &o);
	double t0 = now();
	uint64_t i;
	for (i = 0; i < 200000; i++)
		gb_jsonl__exec(w, 0, 0x401000 + i, i);
	double t1 = now();
	cr_assert(t1 - t0 < 4.0, "producer held %.1f s", t1 - t0);
	cr_assert(gb_jsonl__stalled(w));
	cr_assert_eq(gb_jsonl__finish(w), -EAGAIN);
	cr_assert(now() - t1 < 2.5);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.events, 200000);
	cr_assert(c.dropped > 0);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	static char buf[1 << 20];
	ssize_t n, last = 0;
	while ((n = read(p[0], buf, sizeof(buf))) > 0)
		last = n;
	cr_assert(last > 0 && buf[last - 1] == '\n');
	gb_jsonl__free(w);
}

/* A closed pipe: EPIPE is sticky and reported. */
Test(jsonl, closed_pipe_is_an_error)
{
	signal(SIGPIPE, SIG_IGN);
	int p[2];
	cr_assert(pipe(p) == 0);
	close(p[0]);
	struct gb_jsonl_opts o = { .exec = true };
	struct gb_jsonl *w = gb_jsonl__new(p[1], &o);
	gb_jsonl__exec(w, 0, 0x1000, 0);
	cr_assert_eq(gb_jsonl__flush(w), -EPIPE);
	cr_assert_eq(gb_jsonl__error(w), -EPIPE);
	gb_jsonl__exec(w, 0, 0x1004, 1);
	cr_assert_eq(gb_jsonl__finish(w), -EPIPE);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.events, 2);
	cr_assert_eq(c.dropped, 2);
	gb_jsonl__free(w);
}

/* The vt counter (record/numfmt.h) spells every value as printf does, across
 * each power of ten: its word carries, one digit more, and past 16 digits. */
Test(jsonl, vt_counter_spells_like_printf)
{
	struct gb_numfmt_ctr c = { 0 };
	uint64_t p10 = 1;
	for (int k = 0; k <= 19; k++, p10 *= 10) {
		uint64_t from = p10 > 1500 ? p10 - 1500 : 0;
		for (uint64_t v = from; v < p10 + 1500 && v >= from; v++) {
			char got[40] = { 0 }, want[40];
			int n = gb_numfmt_ctr_put(&c, got, v);
			got[n] = 0;
			snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
			cr_assert_str_eq(got, want, "v %llu", (unsigned long long)v);
			if (v % 7 == 3) /* (the same value again, as an access line asks) */
				cr_assert_eq(gb_numfmt_ctr_put(&c, got, v), n);
		}
		if (k == 19)
			break;
	}
}

/* gb_jsonl__insn writes what gb_jsonl__exec and a gb_jsonl__mem per access
 * write, byte for byte and count for count: in and out of batch mode,
 * across vcpus, pcs sharing a cache slot, 0 to 64 accesses, a budget
 * reached inside an instruction, and with exec off. */
Test(jsonl, insn_same_as_line_by_line)
{
	static const uint64_t budgets[] = { 0, 1, 777, 5000 };
	for (size_t b = 0; b < 2 * sizeof(budgets) / sizeof(budgets[0]); b++) {
		int fd[2] = { memfile(), memfile() };
		struct gb_jsonl_opts o = { .exec = b % 2 == 0, .max_events = budgets[b / 2],
					   .has_start = true, .start = 0x401000 };
		struct gb_jsonl *w[2] = { gb_jsonl__new(fd[0], &o), gb_jsonl__new(fd[1], &o) };
		struct gb_access acc[64];
		uint64_t vt = 99990;
		for (int i = 0; i < 3000; i++, vt += 1 + (i % 97 == 0)) {
			bool batch = (i / 500) % 2 == 0;
			if (i % 500 == 0) {
				gb_jsonl__batch(w[0], batch);
				gb_jsonl__batch(w[1], batch);
			}
			uint32_t vcpu = (uint32_t)(i / 300 % 3 == 2 ? 12 : i / 300 % 3);
			/* (0x401000 and 0x402000 share a slot of the pcs' cache) */
			uint64_t pc = i % 11 == 0 ? 0x402000 : 0x401000 + (uint64_t)(i % 7) * 3;
			int nacc = i % 13 == 0 ? 64 : i % 4;
			for (int k = 0; k < nacc; k++)
				acc[k] = (struct gb_access){ 0x7ffe0000 + (uint64_t)i * 8 + (uint64_t)k,
							     (uint32_t)(1u << (k % 7)), (i + k) % 3 == 0 };
			gb_jsonl__insn(w[0], vcpu, pc, acc, nacc, vt);
			gb_jsonl__exec(w[1], vcpu, pc, vt);
			for (int k = 0; k < nacc; k++)
				gb_jsonl__mem(w[1], acc[k].write, vcpu, acc[k].addr, acc[k].size, pc, vt);
		}
		struct gb_jsonl_counts c[2];
		for (int k = 0; k < 2; k++) {
			gb_jsonl__batch(w[k], false);
			cr_assert_eq(gb_jsonl__finish(w[k]), 0);
			gb_jsonl__counts(w[k], &c[k]);
		}
		cr_assert(!memcmp(&c[0], &c[1], sizeof(c[0])), "counts, budget %llu",
			  (unsigned long long)o.max_events);
		char *s0 = slurp(fd[0]), *s1 = slurp(fd[1]);
		cr_assert(strlen(s1) > 100);
		cr_assert_str_eq(s0, s1, "budget %llu exec %d", (unsigned long long)o.max_events, o.exec);
		free(s0);
		free(s1);
		gb_jsonl__free(w[0]);
		gb_jsonl__free(w[1]);
		close(fd[0]);
		close(fd[1]);
	}
}

/* The lines' texts (record/linefmt.h) without the cache of pcs (no memory
 * for it: each pc's text made again) are the same bytes as with it. */
Test(jsonl, linefmt_without_its_cache_same_lines)
{
	struct gb_linefmt a, b;
	gb_linefmt_init(&a);
	gb_linefmt_init(&b);
	gb_linefmt_free(&b); /* (b.pcs NULL: its one slot) */
	size_t cap = 1 << 20, na = 0, nb = 0;
	char *sa = malloc(cap), *sb = malloc(cap);
	for (uint64_t i = 0; i < 2000; i++) {
		uint64_t pc = i % 5 == 0 ? 0x402000 + i % 3 : 0x401000 + i % 9;
		uint32_t vcpu = (uint32_t)(i / 100 % 4 == 3 ? 4000000000u : i / 100 % 4);
		uint64_t vt = 99999990 + i - i % 3;
		na = (size_t)(gb_linefmt_exec(&a, sa + na, vcpu, pc, vt) - sa);
		nb = (size_t)(gb_linefmt_exec(&b, sb + nb, vcpu, pc, vt) - sb);
		na = (size_t)(gb_linefmt_acc(&a, sa + na, vcpu, i & 1, UINT64_MAX - i, (uint32_t)i % 70,
					     pc, vt) - sa);
		nb = (size_t)(gb_linefmt_acc(&b, sb + nb, vcpu, i & 1, UINT64_MAX - i, (uint32_t)i % 70,
					     pc, vt) - sb);
		cr_assert(na + GB_LINEFMT_ROOM * 2 < cap);
	}
	cr_assert_eq(na, nb);
	cr_assert(!memcmp(sa, sb, na));
	char want[200];
	snprintf(want, sizeof(want), "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x402000\",\"vt\":99999990}\n");
	cr_assert(!strncmp(sa, want, strlen(want)), "%.80s", sa);
	gb_linefmt_free(&a);
	free(sa);
	free(sb);
}
