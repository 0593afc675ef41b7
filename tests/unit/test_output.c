/* Creating outputs (record/output.c) and recording directories
 * (record/recording.c): write-only, no symlinks followed, modes, FIFOs
 * without a reader, foreign and non-empty directories, --force. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "record/output.h"
#include "record/recording.h"

static char *tmpdir(void)
{
	static char d[64];
	snprintf(d, sizeof(d), "/tmp/gebpf-out-XXXXXX");
	cr_assert(mkdtemp(d));
	return d;
}

static char *join(const char *a, const char *b)
{
	static char buf[4][512];
	static int k;
	char *p = buf[k++ & 3];
	snprintf(p, 512, "%s/%s", a, b);
	return p;
}

static void touch(const char *p)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(fd >= 0, "%s: %s", p, strerror(errno));
	cr_assert(write(fd, "x\n", 2) == 2);
	close(fd);
}

Test(output, fifo_without_reader_is_refused_at_once, .init = cr_redirect_stderr)
{
	char *d = tmpdir(), *f = join(d, "fifo");
	cr_assert(mkfifo(f, 0644) == 0);
	struct gb_output o;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(gb_output_open(&o, f, GB_OUTPUT_SHARED), -ENXIO);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert(t1.tv_sec - t0.tv_sec < 1);
	fflush(stderr);
	char want[600];
	snprintf(want, sizeof(want), "gebpf: %s: cannot write: a FIFO with no reader (start the "
		 "reader first)\n", f);
	cr_assert_stderr_eq_str(want);
}

Test(output, fifo_with_reader_is_write_only_and_blocking)
{
	char *d = tmpdir(), *f = join(d, "fifo");
	cr_assert(mkfifo(f, 0644) == 0);
	int r = open(f, O_RDONLY | O_NONBLOCK);
	cr_assert(r >= 0);
	struct gb_output o;
	cr_assert_eq(gb_output_open(&o, f, GB_OUTPUT_SHARED), 0);
	int fl = fcntl(o.fd, F_GETFL);
	cr_assert_eq(fl & O_ACCMODE, O_WRONLY);
	cr_assert_eq(fl & O_NONBLOCK, 0);
	cr_assert_not(o.created);
	gb_output_close(&o, true);
	cr_assert(access(f, F_OK) == 0, "an existing FIFO is never removed");
}

Test(output, symlink_is_not_followed, .init = cr_redirect_stderr)
{
	char *d = tmpdir(), *target = join(d, "victim"), *link = join(d, "link");
	touch(target);
	cr_assert(symlink(target, link) == 0);
	cr_assert(lchown(link, 65534, 65534) == 0); /* planted by another user */
	struct gb_output o;
	cr_assert_eq(gb_output_open(&o, link, GB_OUTPUT_SHARED), -ELOOP);
	struct stat st;
	cr_assert(stat(target, &st) == 0 && st.st_size == 2, "the symlink's target was truncated");
	/* Our own symlink, but in a directory another user can change. */
	char *theirs = tmpdir(), *link2 = join(theirs, "link");
	cr_assert(symlink(target, link2) == 0 && chown(theirs, 65534, 65534) == 0);
	cr_assert_eq(gb_output_open(&o, link2, GB_OUTPUT_SHARED), -ELOOP);
	cr_assert(stat(target, &st) == 0 && st.st_size == 2);
}

/* Even root's own symlink in the sticky /tmp is not followed (issue 23:
 * -o LINK overwrote the link's target): the error names the link's target
 * and the target is untouched. */
Test(output, root_symlink_is_refused, .init = cr_redirect_stderr)
{
	char target[] = "/tmp/gebpf-out-target-XXXXXX", link[64];
	int t = mkstemp(target);
	cr_assert_geq(t, 0);
	cr_assert_eq(write(t, "x\n", 2), 2);
	close(t);
	snprintf(link, sizeof(link), "%s.link", target);
	cr_assert_eq(symlink(target, link), 0);
	struct gb_output o;
	int r = gb_output_open(&o, link, GB_OUTPUT_SHARED);
	struct stat st;
	int sr = stat(target, &st);
	unlink(link);
	unlink(target);
	cr_assert_eq(r, -ELOOP);
	cr_assert(sr == 0 && st.st_size == 2, "the symlink's target was truncated");
	fflush(stderr);
	char want[300];
	snprintf(want, sizeof(want), "gebpf: %s: cannot write: a symbolic link (to %s); give the "
		 "real path\n", link, target);
	cr_assert_stderr_eq_str(want);
}

/* -o /dev/stdout writes to the descriptor gebpf has: a file the shell
 * opened for appending (`>> log`) is appended to, never truncated (a
 * reopen with O_TRUNC emptied the CI log when it ran here). */
Test(output, dev_stdout_appends_to_the_open_file)
{
	char p[] = "/tmp/gebpf-out-stdout-XXXXXX";
	int f = mkstemp(p);
	cr_assert_geq(f, 0);
	cr_assert_eq(write(f, "kept\n", 5), 5);
	int saved = dup(1);
	cr_assert_geq(dup2(f, 1), 0);
	struct gb_output o;
	int r = gb_output_open(&o, "/dev/stdout", GB_OUTPUT_SHARED);
	int w = r == 0 ? (int)write(o.fd, "more\n", 5) : -1;
	if (r == 0)
		gb_output_close(&o, true);
	dup2(saved, 1);
	close(saved);
	cr_assert_eq(r, 0);
	cr_assert_not(o.created);
	cr_assert_eq(w, 5);
	struct stat st;
	cr_assert(fstat(f, &st) == 0);
	cr_assert_eq(st.st_size, 10, "the file holds %lld bytes", (long long)st.st_size);
	char buf[16] = { 0 };
	cr_assert_eq(pread(f, buf, 10, 0), 10);
	cr_assert_str_eq(buf, "kept\nmore\n");
	close(f);
	unlink(p);
	cr_assert_eq(gb_output_open(&o, "/dev/fd/999", GB_OUTPUT_SHARED), -EBADF);
}

Test(output, modes_and_discard)
{
	umask(0);
	char *d = tmpdir(), *a = join(d, "a"), *b = join(d, "b"), *c = join(d, "c");
	struct gb_output o;
	struct stat st;
	cr_assert_eq(gb_output_open(&o, a, GB_OUTPUT_SHARED), 0);
	cr_assert(o.created);
	cr_assert_eq(fcntl(o.fd, F_GETFL) & O_ACCMODE, O_WRONLY);
	cr_assert(fstat(o.fd, &st) == 0 && (st.st_mode & 07777) == 0644);
	gb_output_close(&o, false);
	cr_assert_eq(gb_output_open(&o, b, GB_OUTPUT_PRIVATE), 0);
	cr_assert(fstat(o.fd, &st) == 0 && (st.st_mode & 07777) == 0600);
	gb_output_close(&o, true);
	cr_assert(access(b, F_OK) != 0, "a file created for a failed command is removed");
	touch(c);
	cr_assert_eq(gb_output_open(&o, c, GB_OUTPUT_SHARED), 0);
	cr_assert_not(o.created);
	cr_assert(fstat(o.fd, &st) == 0 && st.st_size == 0);
	gb_output_close(&o, true);
	cr_assert(access(c, F_OK) == 0, "a file that existed is never removed");
}

static struct gb_recording_meta meta(void)
{
	static struct gb_jsonl_opts jo = { .exec = true };
	static struct gb_jsonl_counts c;
	return (struct gb_recording_meta){ .pid = 1, .end_reason = "x", .exit_status = -1,
					   .trace = &jo, .counts = &c };
}

Test(recording, planted_symlink_blobs_is_not_followed, .init = cr_redirect_stderr)
{
	char *d = tmpdir(), *victim = tmpdir();
	char vd[64];
	snprintf(vd, sizeof(vd), "%s", victim);
	cr_assert(symlink(vd, join(d, "blobs")) == 0);
	/* Owned by another user and not empty: refused. */
	cr_assert(chown(d, 65534, 65534) == 0);
	cr_assert_null(gb_recording__open(d, false));
	cr_assert_null(gb_recording__open(d, true));
	cr_assert(access(join(vd, ".trace.jsonl.tmp"), F_OK) != 0);
	cr_assert(access(join(vd, "trace.jsonl"), F_OK) != 0);
}

Test(recording, foreign_empty_dir_is_used_safely)
{
	char *d = tmpdir();
	cr_assert(chown(d, 65534, 65534) == 0);
	struct gb_recording *r = gb_recording__open(d, false);
	cr_assert(r);
	struct gb_recording_meta m = meta();
	cr_assert_eq(gb_recording__finish(r, &m), 0);
	gb_recording__free(r);
	cr_assert(access(join(d, "meta.json"), F_OK) == 0);
	cr_assert(access(join(d, "blobs/trace.jsonl"), F_OK) == 0);
}

/* A zstd trace is blobs/trace.jsonl.zst, which meta.json's trace_blob
 * names; --force removes it as gebpf's own. */
Test(recording, zstd_trace_blob_is_named_and_forced_away)
{
	char *d = tmpdir();
	struct gb_recording *r = gb_recording__open(d, false);
	cr_assert(r);
	gb_recording__set_zstd(r, true);
	struct gb_recording_meta m = meta();
	cr_assert_eq(gb_recording__finish(r, &m), 0);
	gb_recording__free(r);
	cr_assert(access(join(d, "blobs/trace.jsonl.zst"), F_OK) == 0);
	cr_assert(access(join(d, "blobs/trace.jsonl"), F_OK) != 0);
	FILE *f = fopen(join(d, "meta.json"), "r");
	char buf[4096] = { 0 };
	cr_assert(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	cr_assert(strstr(buf, "\"trace_blob\":\t\"blobs/trace.jsonl.zst\"") ||
		  strstr(buf, "\"trace_blob\": \"blobs/trace.jsonl.zst\""), "%s", buf);
	r = gb_recording__open(d, true);
	cr_assert(r);
	cr_assert(access(join(d, "blobs/trace.jsonl.zst"), F_OK) != 0);
	gb_recording__free(r);
}

Test(recording, symlink_dir_is_refused, .init = cr_redirect_stderr)
{
	char *d = tmpdir();
	char real[128], link[128];
	snprintf(real, sizeof(real), "%s/real", d);
	snprintf(link, sizeof(link), "%s/link", d);
	cr_assert(mkdir(real, 0755) == 0 && symlink(real, link) == 0);
	cr_assert_null(gb_recording__open(link, false));
}

Test(recording, non_empty_needs_force_which_clears_only_ours, .init = cr_redirect_stderr)
{
	char *d = tmpdir();
	struct gb_recording *r = gb_recording__open(d, false);
	cr_assert(r);
	cr_assert_eq(gb_recording__add_snapshot(r, 10, 0x1000, 1, "snap-10.core"), 0);
	touch(join(d, "blobs/snap-10.core"));
	struct gb_recording_meta m = meta();
	cr_assert_eq(gb_recording__finish(r, &m), 0);
	gb_recording__free(r);

	cr_assert_null(gb_recording__open(d, false), "a non-empty DIR needs --force");
	r = gb_recording__open(d, true);
	cr_assert(r);
	cr_assert(access(join(d, "blobs/snap-10.core"), F_OK) != 0, "stale blob kept");
	cr_assert(access(join(d, "meta.json"), F_OK) != 0);
	gb_recording__free(r);

	touch(join(d, "notes.txt"));
	cr_assert_null(gb_recording__open(d, true), "--force removed a file gebpf did not write");
	cr_assert(access(join(d, "notes.txt"), F_OK) == 0);
	cr_assert(access(join(d, "blobs"), F_OK) == 0, "--force cleared part of it, then refused");
}
