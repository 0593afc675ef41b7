/* The trace writer with zstd output (record/lines_zstd.c over
 * record/zframes.c): the file decompresses to the plain writer's bytes, the
 * frame in progress reaches the file within about a second and at a flush,
 * a full disk leaves whole frames with the summary's last (written +
 * dropped = events), and a pipe nobody reads does not hold the tracer. */
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
#include <zstd.h>

#include "record/jsonl.h"

static int memfile(void)
{
	int fd = memfd_create("jsonl-zstd", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	return fd;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The file decompressed by libzstd's streaming decoder (caller frees);
 * *whole: it ended between frames. */
static char *unzstd(int fd, size_t *len, bool *whole)
{
	struct stat st;
	cr_assert(fstat(fd, &st) == 0);
	char *in = malloc((size_t)st.st_size + 1);
	cr_assert(pread(fd, in, (size_t)st.st_size, 0) == st.st_size);
	size_t cap = 1 << 20, n = 0;
	char *out = malloc(cap);
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer ib = { in, (size_t)st.st_size, 0 };
	size_t r = 0;
	while (ib.pos < ib.size) {
		if (cap - n < (1 << 20))
			out = realloc(out, cap *= 2);
		ZSTD_outBuffer ob = { out + n, cap - n - 1, 0 };
		r = ZSTD_decompressStream(ds, &ob, &ib);
		cr_assert(!ZSTD_isError(r), "%s", ZSTD_getErrorName(r));
		n += ob.pos;
	}
	ZSTD_freeDStream(ds);
	free(in);
	out[n] = 0;
	*len = n;
	*whole = r == 0;
	return out;
}

static void lines(struct gb_jsonl *w, uint64_t from, uint64_t n)
{
	for (uint64_t i = from; i < from + n; i++) {
		gb_jsonl__exec(w, 0, 0x401000 + (i & 0xfff), i);
		if (i % 3 == 0)
			gb_jsonl__mem(w, i & 1, 0, 0x7ffe0000 + (i & 0xff) * 8, 8, 0x401000 + (i & 0xfff), i);
	}
}

/* The same lines through the plain and the zstd writer: decompressed, the
 * same bytes; the file is smaller by far. */
Test(jsonl_zstd, decompresses_to_the_plain_bytes)
{
	int fp = memfile(), fz = memfile();
	struct gb_jsonl_opts o = { .exec = true, .max_events = 0 };
	struct gb_jsonl *wp = gb_jsonl__new(fp, &o);
	o.zstd = true;
	struct gb_jsonl *wz = gb_jsonl__new(fz, &o);
	lines(wp, 0, 300000);
	lines(wz, 0, 300000);
	cr_assert_eq(gb_jsonl__finish(wp), 0);
	cr_assert_eq(gb_jsonl__finish(wz), 0);
	struct stat sp, sz;
	fstat(fp, &sp);
	fstat(fz, &sz);
	size_t n;
	bool whole;
	char *d = unzstd(fz, &n, &whole);
	cr_assert(whole);
	char *p = malloc((size_t)sp.st_size);
	cr_assert(pread(fp, p, (size_t)sp.st_size, 0) == sp.st_size);
	cr_assert_eq(n, (size_t)sp.st_size);
	cr_assert_eq(memcmp(d, p, n), 0);
	cr_assert_lt(sz.st_size * 10, sp.st_size, "%lld of %lld", (long long)sz.st_size,
		     (long long)sp.st_size);
	free(d);
	free(p);
	gb_jsonl__free(wp);
	gb_jsonl__free(wz);
}

/* One line and nothing more: its frame ends within about a second without
 * a flush (a SIGKILLed gebpf leaves it); a flush ends the frame at once. */
Test(jsonl_zstd, frame_ends_within_a_second_and_at_a_flush)
{
	int fd = memfile();
	struct gb_jsonl_opts o = { .exec = true, .zstd = true };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	gb_jsonl__exec(w, 0, 0x1000, 0);
	double t0 = now();
	struct stat st = { 0 };
	while (now() - t0 < 2.0 && (fstat(fd, &st), st.st_size == 0))
		usleep(10000);
	cr_assert_gt(st.st_size, 0, "no frame after 2 s");
	cr_assert_lt(now() - t0, 1.6);
	size_t n;
	bool whole;
	char *d = unzstd(fd, &n, &whole);
	cr_assert(whole);
	cr_assert_str_eq(d, "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1000\",\"vt\":0}\n");
	free(d);
	gb_jsonl__exec(w, 0, 0x1004, 1);
	cr_assert_eq(gb_jsonl__flush(w), 0);
	d = unzstd(fd, &n, &whole);
	cr_assert(whole);
	cr_assert_str_eq(d, "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1000\",\"vt\":0}\n"
			    "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1004\",\"vt\":1}\n");
	free(d);
	gb_jsonl__free(w);
}

/* A full disk (RLIMIT_FSIZE stands in for it) met by a frame: the file is
 * cut back to its last whole frame, the summary's frame still ends it,
 * and written + dropped = events (the lost frames' lines counted). */
Test(jsonl_zstd, full_disk_whole_frames_summary_last)
{
	signal(SIGXFSZ, SIG_IGN);
	char path[] = "/tmp/gebpf-jsonl-zstd-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	struct rlimit rl = { 400000, 400000 };
	cr_assert(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	struct gb_jsonl_opts o = { .exec = true, .max_events = 0, .zstd = true };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	lines(w, 0, 2000000); /* ~120 MB of lines: ~30 frames */
	cr_assert_eq(gb_jsonl__finish(w), -EFBIG);
	struct stat st;
	fstat(fd, &st);
	cr_assert_leq(st.st_size, 400000);
	size_t n;
	bool whole;
	char *d = unzstd(fd, &n, &whole);
	cr_assert(whole, "the file ends inside a frame");
	cr_assert(n > 0 && d[n - 1] == '\n');
	uint64_t nl = 0;
	char *last = d;
	for (char *p = d; *p; p++)
		if (*p == '\n') {
			nl++;
			if (p[1])
				last = p + 1;
		}
	cr_assert(!strncmp(last, "{\"t\":\"summary\"", 14), "last line: %.200s", last);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.events, 2000000 + 2000000 / 3 + 1);
	cr_assert_gt(nl, 4u << 20 >> 6, "at least a frame of lines kept: %llu", (unsigned long long)nl);
	cr_assert_eq(c.events - c.dropped, nl - 1);
	char want[128];
	snprintf(want, sizeof(want), ",\"dropped\":%llu,", (unsigned long long)c.dropped);
	cr_assert(strstr(last, want), "%s", last);
	free(d);
	gb_jsonl__free(w);
}

/* A pipe nobody reads: the tracer is held only until `duration`; finish()
 * returns -EAGAIN within a few seconds. */
Test(jsonl_zstd, stalled_pipe_gives_up_after_duration)
{
	int p[2];
	cr_assert(pipe(p) == 0);
	struct gb_jsonl_opts o = { .exec = true, .max_events = 0, .duration = 0.5, .zstd = true };
	struct gb_jsonl *w = gb_jsonl__new(p[1], &o);
	double t0 = now();
	lines(w, 0, 3000000);
	double t1 = now();
	cr_assert(t1 - t0 < 6.0, "producer held %.1f s", t1 - t0);
	cr_assert_eq(gb_jsonl__finish(w), -EAGAIN);
	cr_assert(now() - t1 < 4.0, "finish took %.1f s", now() - t1);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert(c.dropped > 0);
	gb_jsonl__free(w);
}
