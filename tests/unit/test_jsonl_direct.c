/* The trace writer's direct I/O (record/lines.h, gb_lines_opts.direct): a
 * file gebpf opened itself gets its aligned part with O_DIRECT and the rest
 * buffered; the bytes are those of the buffered writer, the file ends at a
 * line's end after every round, and a full disk still keeps whole lines
 * with the summary last. */
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

#include "record/jsonl.h"

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

/* Lines of varying length (the vt and addresses grow), i from..to. */
static void produce(struct gb_jsonl *w, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++) {
		gb_jsonl__exec(w, (uint32_t)(i % 3), 0x401000 + i * 7, i);
		if (i % 5 == 0)
			gb_jsonl__mem(w, i % 2, 0, 0x7ffe0000 + i * 13, 1u << (i % 4), 0x401000 + i * 7, i);
	}
}

static struct gb_jsonl *open_writer(int fd, bool direct)
{
	struct gb_jsonl_opts o = { .exec = true, .direct = direct };
	struct gb_jsonl *w = gb_jsonl__new(fd, &o);
	cr_assert(w);
	return w;
}

Test(jsonl_direct, same_bytes_as_the_buffered_writer)
{
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	int ref = memfd_create("ref", MFD_CLOEXEC);
	struct gb_jsonl *w = open_writer(fd, true), *r = open_writer(ref, false);
	cr_assert_eq(direct_fds(fd), 1, "the writer opened no O_DIRECT descriptor");
	produce(w, 0, 300000); /* ~17 MB: many rounds of the 1 MiB buffers */
	produce(r, 0, 300000);
	cr_assert_eq(gb_jsonl__finish(w), 0);
	cr_assert_eq(gb_jsonl__finish(r), 0);
	size_t n, m;
	char *a = slurp(fd, &n), *b = slurp(ref, &m);
	cr_assert(n > (16u << 20), "%zu bytes", n);
	cr_assert_eq(n, m);
	cr_assert(!memcmp(a, b, n), "the direct writer's bytes differ");
	gb_jsonl__free(w);
	gb_jsonl__free(r);
	cr_assert_eq(direct_fds(fd), 0, "the O_DIRECT descriptor outlives the writer");
	free(a);
	free(b);
}

/* After a flush the file holds exactly the lines so far, ending at a line's
 * end (its unaligned end written buffered), and the next round's direct
 * write over that block keeps every byte. */
Test(jsonl_direct, flushed_file_ends_at_a_line_end)
{
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	int ref = memfd_create("ref", MFD_CLOEXEC);
	struct gb_jsonl *w = open_writer(fd, true), *r = open_writer(ref, false);
	uint64_t cuts[] = { 1, 2, 77, 5000, 123457, 123458, 250000 };
	uint64_t at = 0;
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		produce(w, at, cuts[k]);
		produce(r, at, cuts[k]);
		at = cuts[k];
		cr_assert_eq(gb_jsonl__flush(w), 0);
		cr_assert_eq(gb_jsonl__flush(r), 0);
		size_t n, m;
		char *a = slurp(fd, &n), *b = slurp(ref, &m);
		cr_assert(n > 0 && a[n - 1] == '\n', "after %llu: ends mid-line (%zu bytes)",
			  (unsigned long long)at, n);
		cr_assert(n == m && !memcmp(a, b, n), "after %llu: %zu bytes, want %zu",
			  (unsigned long long)at, n, m);
		free(a);
		free(b);
	}
	cr_assert_eq(gb_jsonl__finish(w), 0);
	cr_assert_eq(gb_jsonl__finish(r), 0);
	size_t n, m;
	char *a = slurp(fd, &n), *b = slurp(ref, &m);
	cr_assert(n == m && !memcmp(a, b, n));
	free(a);
	free(b);
	gb_jsonl__free(w);
	gb_jsonl__free(r);
}

/* A full disk (RLIMIT_FSIZE, not a multiple of the block size) met by a
 * direct write: whole lines, the summary last, written + dropped = events. */
Test(jsonl_direct, full_disk_whole_lines_summary_last)
{
	signal(SIGXFSZ, SIG_IGN);
	int fd = direct_file();
	if (fd < 0)
		cr_skip_test("no file system here takes O_DIRECT");
	rlim_t lim = (3u << 20) + 1000;
	struct rlimit rl = { lim, lim };
	cr_assert(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	struct gb_jsonl *w = open_writer(fd, true);
	produce(w, 0, 100000);
	cr_assert_eq(gb_jsonl__finish(w), -EFBIG);
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
	cr_assert(!strncmp(last, "{\"t\":\"summary\"", 14), "last line: %.80s", last);
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	cr_assert_eq(c.events - c.dropped, lines - 1);
	free(s);
	gb_jsonl__free(w);
}
