/* The `gebpf sample` writers without a kernel: the JSONL writer's
 * discipline (whole lines, summary last, a write error cut back to whole
 * lines) and the profile's aggregation (folded lines, report counts).
 * Run: .output/unit-tests --filter 'sample_out/...' (the suite sample_out). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sample/profile.h"
#include "sample/jsonl.h"

static char *slurp(int fd, size_t *len)
{
	off_t n = lseek(fd, 0, SEEK_END);
	char *buf = calloc(1, (size_t)n + 1);
	cr_assert(buf);
	cr_assert_eq(pread(fd, buf, (size_t)n, 0), n);
	*len = (size_t)n;
	return buf;
}

static int tmpfd(void)
{
	char path[] = "/tmp/gebpf-sample-out-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	unlink(path);
	return fd;
}

static void write_samples(struct gb_sample_out *w, int n)
{
	for (int i = 0; i < n; i++) {
		struct gb_sample s = { .tid = 7, .pid = 7, .comm = "a\"b", .cpu = 1,
				       .pc = 0x401000 + (uint64_t)i, .ns = 100 + (uint64_t)i };
		gb_sample_out__sample(w, &s);
	}
}

Test(sample_out, exact_lines_and_summary)
{
	int fd = tmpfd();
	struct gb_sample_out *w = gb_sample_out__new(fd);
	struct gb_sample_summary sum = { .st = { .seen = 3, .kept = 2, .other = 1 },
					 .event = "cpu-clock", .hz = 999 };
	size_t len;

	write_samples(w, 2);
	cr_assert_eq(gb_sample_out__finish(w, &sum), 0);
	char *text = slurp(fd, &len);
	cr_assert_str_eq(text,
		"{\"t\":\"sample\",\"vcpu\":1,\"tid\":7,\"pid\":7,\"comm\":\"a\\\"b\",\"pc\":\"0x401000\",\"ns\":100}\n"
		"{\"t\":\"sample\",\"vcpu\":1,\"tid\":7,\"pid\":7,\"comm\":\"a\\\"b\",\"pc\":\"0x401001\",\"ns\":101}\n"
		"{\"t\":\"summary\",\"seen\":3,\"kept\":2,\"filtered\":1,\"filtered_pid\":1,"
		"\"filtered_range\":0,\"lost\":0,\"event\":\"cpu-clock\",\"hz\":999,\"start\":null,"
		"\"end\":null}\n");
	free(text);
	gb_sample_out__free(w);
	close(fd);
}

/* A file that cannot grow past 8 KiB (RLIMIT_FSIZE, as a full disk): the
 * file holds whole lines only, the summary is last and counts the lines
 * that are not there. */
Test(sample_out, full_file_keeps_whole_lines)
{
	struct rlimit rl = { .rlim_cur = 8192, .rlim_max = RLIM_INFINITY };
	int fd = tmpfd();
	struct gb_sample_out *w = gb_sample_out__new(fd);
	struct gb_sample_summary sum = { .st = { .seen = 5000, .kept = 5000 },
					 .event = "cpu-clock", .hz = 999 };
	size_t len, lines = 0;

	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	write_samples(w, 5000);
	cr_assert_neq(gb_sample_out__finish(w, &sum), 0, "the write error is reported");
	char *text = slurp(fd, &len);
	cr_assert(len <= 8192 && len > 0);
	cr_assert_eq(text[len - 1], '\n', "ends with a whole line");
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	char *last = strrchr(text, '\n');
	*last = 0;
	last = strrchr(text, '\n');
	last = last ? last + 1 : text;
	cr_assert(!strncmp(last, "{\"t\":\"summary\"", 14), "summary last: %s", last);
	unsigned long unwritten = 0;
	cr_assert(sscanf(strstr(last, "\"unwritten\":"), "\"unwritten\":%lu", &unwritten) == 1);
	cr_assert_eq(unwritten + (lines - 1), 5000);
	free(text);
	gb_sample_out__free(w);
	close(fd);
}

Test(sample_out, profile_folds_by_name)
{
	struct gb_profile *p = gb_profile__new(NULL, NULL, true);
	const uint64_t a[] = { 0x1000, 0x2000 }, b[] = { 0x1001, 0x2000 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert(p && f);
	/* Unnamed addresses fold to the same "[unknown]" frames. */
	cr_assert_eq(gb_profile__add(p, 5, "x", NULL, 0, a, 2, true), 0);
	cr_assert_eq(gb_profile__add(p, 5, "x", NULL, 0, b, 2, true), 0);
	cr_assert_eq(gb_profile__add(p, 6, "y", NULL, 0, a, 1, true), 0);
	cr_assert_eq(gb_profile__folded(p, f), 0);
	fclose(f);
	cr_assert_str_eq(buf, "x-5;[unknown];[unknown] 2\ny-6;[unknown] 1\n");
	cr_assert_eq(gb_profile__total(p), 3);
	cr_assert_eq(gb_profile__nlocs(p), 4, "a location is per process and address");
	free(buf);
	gb_profile__free(p);
}
