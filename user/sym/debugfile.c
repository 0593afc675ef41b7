/* Separate debug files: debugfile.h. */
#include "sym/debugfile.h"

#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The build ID as lower-case hex ("" when the file has none). */
static void build_id_hex(const unsigned char *bits, int n, char *hex, size_t len)
{
	hex[0] = 0;
	for (int i = 0; i < n && (size_t)(2 * i + 2) < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", bits[i]);
}

static void cache_dir(char *dir, size_t len)
{
	const char *v = getenv("DEBUGINFOD_CACHE_PATH");
	if (v && *v) {
		snprintf(dir, len, "%s", v);
		return;
	}
	if ((v = getenv("XDG_CACHE_HOME")) && *v) {
		snprintf(dir, len, "%s/debuginfod_client", v);
		return;
	}
	snprintf(dir, len, "%s/.cache/debuginfod_client", (v = getenv("HOME")) && *v ? v : "/root");
}

int gb_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		      const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		      char **debuginfo_file_name)
{
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
					      debuglink_file, debuglink_crc, debuginfo_file_name);
	if (fd >= 0)
		return fd;
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);
	char hex[256], dir[PATH_MAX - 300], path[PATH_MAX];
	if (n <= 0)
		return -1;
	build_id_hex(bits, n, hex, sizeof(hex));
	cache_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s/debuginfo", dir, hex);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		*debuginfo_file_name = strdup(path);
	return fd;
}

const Dwfl_Callbacks gb_debugfile_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = gb_find_debuginfo,
};

/* The build ID of the ELF file at path, as hex ("" when none). */
static void file_build_id(const char *path, char *hex, size_t len)
{
	hex[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (e && !hex[0] && (scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		GElf_Nhdr nh;
		size_t off = 0, no, dno;
		while (d && (off = gelf_getnote(d, off, &nh, &no, &dno)) > 0)
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + no, "GNU", 4)) {
				build_id_hex((unsigned char *)d->d_buf + dno, (int)nh.n_descsz, hex, len);
				break;
			}
	}
	elf_end(e);
	close(fd);
}

/* Does the dpkg file list at list name path (or its /usr-merged twin)? */
static int lists_file(const char *list, const char *path, const char *twin)
{
	FILE *f = fopen(list, "re");
	char line[PATH_MAX];
	int hit = 0;
	if (!f)
		return 0;
	while (!hit && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		hit = !strcmp(line, path) || (twin && !strcmp(line, twin));
	}
	fclose(f);
	return hit;
}

/* The Debian package that installed path ("" when none or no dpkg). */
static void owner(const char *path, char *pkg, size_t len)
{
	char real[PATH_MAX];
	const char *p = realpath(path, real) ? real : path;
	/* merged /usr: the lists name /lib/..., the maps /usr/lib/... */
	const char *twin = !strncmp(p, "/usr/", 5) ? p + 4 : NULL;
	DIR *d = opendir("/var/lib/dpkg/info");
	struct dirent *de;
	pkg[0] = 0;
	while (d && !pkg[0] && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char list[PATH_MAX];
		if (n < 6 || strcmp(de->d_name + n - 5, ".list"))
			continue;
		snprintf(list, sizeof(list), "/var/lib/dpkg/info/%s", de->d_name);
		if (lists_file(list, p, twin) || (p != path && lists_file(list, path, NULL)))
			snprintf(pkg, len, "%.*s", (int)strcspn(de->d_name, ":."), de->d_name);
	}
	if (d)
		closedir(d);
}

void gb_debugfile_hint(const char *path, char *buf, size_t len)
{
	char hex[256], pkg[256], where[PATH_MAX];
	file_build_id(path, hex, sizeof(hex));
	if (hex[0])
		snprintf(where, sizeof(where), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	else
		snprintf(where, sizeof(where), "/usr/lib/debug%s.debug (it has no build ID)", path);
	owner(path, pkg, sizeof(pkg));
	if (!pkg[0])
		snprintf(buf, len, "its debug file as %s", where);
	else if (!strcmp(pkg, "libc6"))
		/* glibc's debug symbols are a package of Debian's main archive */
		snprintf(buf, len, "libc6-dbg (its debug file is %s)", where);
	else
		snprintf(buf, len, "%s-dbgsym from Debian's debug archive (its debug file is %s)",
			 pkg, where);
}
