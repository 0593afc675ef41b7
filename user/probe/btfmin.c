/* The kernel's BTF cut down to what one BPF object's CO-RE relocations
 * use, cached for the boot (docs/trace.md "Start-up cost").
 *
 * libbpf resolves an object's CO-RE relocations against the kernel's BTF:
 * it reads /sys/kernel/btf/vmlinux (5-6 MB) and indexes it, about two
 * thirds of the CPU a short `gebpf trace` spends (perf record of a trace
 * of pt_hot).  bpftool's `gen min_core_btf` (BTFgen) writes the few types
 * the relocations touch, at the running kernel's offsets, as a BTF of a
 * few hundred bytes; libbpf takes it in place of the kernel's
 * (bpf_object_open_opts.btf_custom_path).  gebpf makes it once per boot and
 * object, under /run/gebpf/btf (root's, a tmpfs emptied at boot: a kernel
 * cannot change under a boot id), and uses it from then on.  Without
 * bpftool, or as another user than root, every load reads the kernel's BTF
 * as before. */
#include "probe/btfmin.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hash.h"

extern char **environ;

#define DIR_RUN "/run/gebpf"
#define DIR_BTF DIR_RUN "/btf"
#define VMLINUX "/sys/kernel/btf/vmlinux"

/* The boot's id (36 characters) in buf: 0, or -1 if unreadable. */
static int boot_id(char *buf, size_t len)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 8)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return strspn(buf, "0123456789abcdef-") == strlen(buf) ? 0 : -1;
}

/* A directory of root's, not a link: the cache is trusted as the kernel's. */
static int own_dir(const char *path)
{
	struct stat st;

	if (mkdir(path, 0700) && errno != EEXIST)
		return -1;
	if (lstat(path, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		return -1;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* bpftool gen min_core_btf VMLINUX out obj: 0 when it wrote out. */
static int bpftool_min(const char *obj, const char *out)
{
	static const char *const where[] = { "bpftool", "/usr/sbin/bpftool", "/sbin/bpftool" };
	posix_spawn_file_actions_t fa;
	int rc = -1;

	if (posix_spawn_file_actions_init(&fa))
		return -1;
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	for (size_t i = 0; i < sizeof(where) / sizeof(*where) && rc; i++) {
		char *argv[] = { (char *)where[i], "gen", "min_core_btf", VMLINUX, (char *)out,
				 (char *)obj, NULL };
		pid_t pid;
		int st;

		if (posix_spawnp(&pid, where[i], &fa, NULL, argv, environ))
			continue;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

const char *gb_btfmin_path(const char *name, const void *obj, size_t len, char *buf,
			   size_t size)
{
	char boot[64], tmp_obj[512], tmp_out[512];
	const char *env = getenv("GEBPF_BTF_CACHE");
	int fd, rc;

	if ((env && !strcmp(env, "0")) || geteuid() != 0 || boot_id(boot, sizeof(boot)))
		return NULL;
	if ((size_t)snprintf(buf, size, DIR_BTF "/%s-%s-%016llx.btf", name, boot,
			     (unsigned long long)gb_fnv1a(obj, len, GB_FNV1A_INIT)) >= size)
		return NULL;
	if (!access(buf, R_OK))
		return buf;
	if (own_dir(DIR_RUN) || own_dir(DIR_BTF))
		return NULL;
	/* Made beside, then renamed: a concurrent gebpf sees the whole file
	 * or none. */
	snprintf(tmp_obj, sizeof(tmp_obj), DIR_BTF "/.%s-%d.o", name, (int)getpid());
	snprintf(tmp_out, sizeof(tmp_out), DIR_BTF "/.%s-%d.btf", name, (int)getpid());
	fd = open(tmp_obj, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	rc = write_all(fd, obj, len);
	close(fd);
	if (!rc)
		rc = bpftool_min(tmp_obj, tmp_out);
	unlink(tmp_obj);
	if (!rc)
		rc = rename(tmp_out, buf);
	if (rc) {
		unlink(tmp_out);
		return NULL;
	}
	return buf;
}

int gb_btfmin_load(const char *name, const void *obj, size_t len, gb_btfmin_load_fn load,
		   void *ctx, bool *used)
{
	char path[256];
	const char *cut = gb_btfmin_path(name, obj, len, path, sizeof(path));
	int err = load(ctx, cut);

	*used = cut && !err;
	if (err && cut) {
		unlink(cut);   /* (refused: the next gebpf makes it again) */
		err = load(ctx, NULL);
	}
	return err;
}
