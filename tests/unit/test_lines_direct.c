/* The trace writer's direct writes (record/lines.h gb_lines_opts.direct,
 * record/wmode.h): a file gebpf opened itself gets its aligned part with
 * O_DIRECT and the rest buffered; the bytes are those of the buffered
 * writer, the file ends at a line's end after every round, a full disk
 * still keeps whole lines with the summary last, and the way is chosen by
 * measured speed. */
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
#include <unistd.h>

#include "record/lines.h"
#include "record/wmode.h"

/* A new file in a directory whose file system takes O_DIRECT (not tmpfs
 * before Linux 6.6), unlinked; -1 when there is none. */
static int direct_file(void)
{
	const char *dirs[] = { "/var/tmp", "/tmp", ".", NULL };
	for (int i = 0; dirs[i]; i++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/gebpf-direct-XXXXXX", dirs[i]);
		int fd = mkstemp(path);
		if (fd < 0)
			continue;
		int d = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
		unlink(path);
		if (d >= 0) {
			close(d);
			return fd;
		}
		close(fd);
	}
	return -1;
}

static char *slurp(int fd, size_t *n)
{
	struct stat st;
	cr_assert(fstat(fd, &st) == 0);
	char *s = malloc((size_t)st.st_size + 1);
	cr_assert(pread(fd, s, (size_t)st.st_size, 0) == st.st_size);
	s[st.st_size] = 0;
	*n = (size_t)st.st_size;
	return s;
}

/* The file of fd holds the bytes of ref's (when: for the message); its size. */
static size_t expect_same(int fd, int ref, const char *when)
{
	size_t n, m;
	char *a = slurp(fd, &n), *b = slurp(ref, &m);
	cr_assert_eq(n, m, "%s: %zu bytes, want %zu", when, n, m);
	for (size_t k = 0; k < n; k++)
		if (a[k] != b[k])
			cr_assert_fail("%s: byte %zu (block %zu + %zu) differs", when, k, k / 4096, k % 4096);
	free(a);
	free(b);
	return n;
}

/* Descriptors of this process open with O_DIRECT on the file of fd. */
static int direct_fds(int fd)
{
	struct stat want, st;
	cr_assert(fstat(fd, &want) == 0);
	int k = 0;
	for (int i = 0; i < 1024; i++) {
		if (i == fd || fstat(i, &st) || st.st_ino != want.st_ino || st.st_dev != want.st_dev)
			continue;
		int fl = fcntl(i, F_GETFL);
		k += fl >= 0 && (fl & O_DIRECT);
	}
	return k;
}

/* Lines of varying length, i from..to; false once one is refused. */
static bool produce(struct gb_lines *w, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++) {
		char *p = gb_lines__reserve(w, 128);
		if (!p)
			return false;
		int n = snprintf(p, 128, "{\"i\":%llu,\"pad\":\"%.*s\"}\n", (unsigned long long)i,
				 (int)(i * 7919 % 61), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
		gb_lines__commit(w, (size_t)n, 1);
	}
	return true;
}

static size_t summary(void *ctx, char *buf)
{
	(void)ctx;
	return (size_t)sprintf(buf, "{\"t\":\"summary\"}\n");
}

static struct gb_lines *open_lines(int fd, bool direct)
{
	struct gb_lines_opts o = { .direct = direct, .direct_first = direct };
	struct gb_lines *w = gb_lines__new(fd, &o);
	cr_assert(w);
	return w;
}

Test(lines_direct, same_bytes_as_the_buffered_writer)
{
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	int ref = memfd_create("ref", MFD_CLOEXEC);
	struct gb_lines *w = open_lines(fd, true), *r = open_lines(ref, false);
	cr_assert_eq(direct_fds(fd), 1, "the writer opened no O_DIRECT descriptor");
	cr_assert(produce(w, 0, 400000) && produce(r, 0, 400000)); /* ~20 MB: many rounds */
	cr_assert_eq(gb_lines__finish(w, summary, NULL), 0);
	cr_assert_eq(gb_lines__finish(r, summary, NULL), 0);
	size_t n = expect_same(fd, ref, "the direct writer's file");
	cr_assert(n > (16u << 20), "%zu bytes", n);
	gb_lines__free(w);
	gb_lines__free(r);
	cr_assert_eq(direct_fds(fd), 0, "the O_DIRECT descriptor outlives the writer");
}

/* Chosen by speed (not direct first): ~80 MB take both ways, turning at
 * least twice; rounds of one line (a flush after each) come right after
 * big ones, so that some turn to direct writes in a round that holds less
 * than the block it ends in.  The bytes are the buffered writer's. */
Test(lines_direct, turning_between_the_ways_keeps_every_byte)
{
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	int ref = memfd_create("ref", MFD_CLOEXEC);
	struct gb_lines_opts o = { .direct = true };
	struct gb_lines *w = gb_lines__new(fd, &o), *r = open_lines(ref, false);
	cr_assert(w);
	uint64_t i = 0;
	while (i < 1500000) {
		uint64_t big = i + 1000 + i % 977;
		cr_assert(produce(w, i, big) && produce(r, i, big));
		cr_assert_eq(gb_lines__flush(w), 0);
		cr_assert(produce(w, big, big + 1) && produce(r, big, big + 1));
		cr_assert_eq(gb_lines__flush(w), 0);
		i = big + 1;
	}
	cr_assert_eq(gb_lines__finish(w, summary, NULL), 0);
	cr_assert_eq(gb_lines__finish(r, summary, NULL), 0);
	size_t n = expect_same(fd, ref, "turning between the ways");
	cr_assert(n > (64u << 20), "%zu bytes", n);
	struct gb_lines_status st;
	gb_lines__status(w, &st);
	cr_assert(st.switches >= 2 && st.bytes_direct > (1u << 20), "%llu changes, %llu bytes direct",
		  (unsigned long long)st.switches, (unsigned long long)st.bytes_direct);
	gb_lines__free(w);
	gb_lines__free(r);
}

/* After a flush the file holds exactly the lines so far, ending at a line's
 * end (its unaligned end written buffered), and the next round's direct
 * write over that block keeps every byte. */
Test(lines_direct, flushed_file_ends_at_a_line_end)
{
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	int ref = memfd_create("ref", MFD_CLOEXEC);
	struct gb_lines *w = open_lines(fd, true), *r = open_lines(ref, false);
	uint64_t cuts[] = { 1, 2, 77, 5000, 123457, 123458, 250000 };
	uint64_t at = 0;
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		cr_assert(produce(w, at, cuts[k]) && produce(r, at, cuts[k]));
		at = cuts[k];
		cr_assert_eq(gb_lines__flush(w), 0);
		cr_assert_eq(gb_lines__flush(r), 0);
		char when[64], last = 0;
		snprintf(when, sizeof(when), "after %llu lines", (unsigned long long)at);
		size_t n = expect_same(fd, ref, when);
		cr_assert(n > 0 && pread(fd, &last, 1, (off_t)n - 1) == 1 && last == '\n',
			  "%s: ends mid-line (%zu bytes)", when, n);
	}
	cr_assert_eq(gb_lines__finish(w, summary, NULL), 0);
	cr_assert_eq(gb_lines__finish(r, summary, NULL), 0);
	expect_same(fd, ref, "at the end");
	gb_lines__free(w);
	gb_lines__free(r);
}

/* A full disk (RLIMIT_FSIZE, not a multiple of the block size) met by a
 * direct write: whole lines, the summary last, committed = written + lost. */
Test(lines_direct, full_disk_whole_lines_summary_last)
{
	signal(SIGXFSZ, SIG_IGN);
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	rlim_t lim = (3u << 20) + 1000;
	struct rlimit rl = { lim, lim };
	cr_assert(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	struct gb_lines *w = open_lines(fd, true);
	uint64_t committed = 0;
	while (committed < 200000 && produce(w, committed, committed + 1))
		committed++;
	cr_assert_eq(gb_lines__finish(w, summary, NULL), -EFBIG);
	size_t n;
	char *s = slurp(fd, &n);
	cr_assert(n > (2u << 20) && n <= lim && s[n - 1] == '\n', "torn file: %zu bytes", n);
	uint64_t lines = 0;
	char *last = s;
	for (char *p = s; *p; p++)
		if (*p == '\n') {
			lines++;
			if (p[1])
				last = p + 1;
		}
	cr_assert_str_eq(last, "{\"t\":\"summary\"}\n");
	struct gb_lines_status st;
	gb_lines__status(w, &st);
	cr_assert_eq(committed, lines - 1 + st.lost, "%llu committed, %llu written, %llu lost",
		     (unsigned long long)committed, (unsigned long long)lines - 1,
		     (unsigned long long)st.lost);
	free(s);
	gb_lines__free(w);
}

/* The way is chosen by measured speed: buffered first, direct tried after a
 * window, the faster kept, the other tried again after GB_WMODE_RETRY. */
static void window(struct gb_wmode *m, double mb_per_s, bool *changed)
{
	uint64_t ns = (uint64_t)((double)GB_WMODE_WINDOW / (mb_per_s * 1e6) * 1e9);
	*changed = gb_wmode__round(m, GB_WMODE_WINDOW / 2, ns / 2);
	cr_assert(!*changed, "changed in the middle of a window");
	*changed = gb_wmode__round(m, GB_WMODE_WINDOW / 2, ns / 2);
}

Test(lines_direct, the_faster_way_is_kept)
{
	struct gb_wmode m;
	bool ch;
	gb_wmode__init(&m, true);
	cr_assert(!m.direct);
	window(&m, 400, &ch); /* buffered at 400 MB/s: try direct */
	cr_assert(ch && m.direct);
	window(&m, 1500, &ch); /* direct at 1.5 GB/s: kept */
	cr_assert(!ch && m.direct);
	for (uint64_t b = 2 * GB_WMODE_WINDOW; b < GB_WMODE_RETRY; b += GB_WMODE_WINDOW) {
		window(&m, 1500, &ch);
		cr_assert(!ch && m.direct, "buffered tried again after %llu MiB",
			  (unsigned long long)(b >> 20));
	}
	window(&m, 1500, &ch); /* buffered not measured for GB_WMODE_RETRY: again */
	cr_assert(ch && !m.direct);
	window(&m, 3000, &ch); /* buffered at 3 GB/s now (pages reused): kept */
	cr_assert(!ch && !m.direct);
	window(&m, 3000, &ch);
	cr_assert(!ch && !m.direct);
	window(&m, 200, &ch); /* buffered throttled to 200 MB/s: direct (1.5) is faster */
	cr_assert(ch && m.direct);
	window(&m, 170, &ch); /* a busy disk: direct at 170 MB/s, buffered was 200: not 1.25x */
	cr_assert(!ch && m.direct);
	window(&m, 100, &ch); /* 100: buffered's 200 is 2x: back */
	cr_assert(ch && !m.direct);
	gb_wmode__no_direct(&m);
	window(&m, 10, &ch);
	cr_assert(!ch && !m.direct);
}

/* A way tried again that loses is tried twice as late the next time, and
 * its window ends at a quarter when it is far behind by then. */
Test(lines_direct, a_losing_way_is_tried_less_often)
{
	struct gb_wmode m;
	bool ch;
	gb_wmode__init(&m, true);
	window(&m, 1000, &ch); /* buffered 1 GB/s: try direct */
	cr_assert(ch && m.direct);
	/* direct at 100 MB/s: far behind at a quarter of its window */
	uint64_t q = GB_WMODE_WINDOW / 4;
	cr_assert(gb_wmode__round(&m, q, (uint64_t)((double)q / 100e6 * 1e9)));
	cr_assert(!m.direct);
	uint64_t wait = 2 * GB_WMODE_RETRY; /* (the first try lost too) */
	for (int k = 0; k < 3; k++, wait *= 2) {
		uint64_t b = 0;
		do {
			window(&m, 1000, &ch);
			b += GB_WMODE_WINDOW;
		} while (!ch && b < 4 * wait);
		cr_assert(ch && m.direct, "direct not tried again");
		cr_assert(b >= wait && b <= wait + GB_WMODE_WINDOW, "tried after %llu MiB, want %llu",
			  (unsigned long long)(b >> 20), (unsigned long long)(wait >> 20));
		cr_assert(gb_wmode__round(&m, q, (uint64_t)((double)q / 100e6 * 1e9)));
		cr_assert(!m.direct);
	}
}
