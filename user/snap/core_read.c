/* Reading a snapshot back from its ELF core (docs/snapshot-format.md).
 *
 * The file is mapped read-only and private, so map bytes are read where they
 * lie, holes read as zeros without touching the disk, a core larger than
 * memory opens (nothing is committed), and gb_snapshot_write_memory changes
 * only this process's copy of the pages it writes.  Any x86-64 ELF
 * core is accepted; without a GEBPF note the JSON-only parts (stack traces,
 * fds, meta) are empty and map names come from NT_FILE.
 */
#include "snap/snapshot.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "snap/note_json.h"

struct reader {
	const char *what;          /* the caller's context for messages, or NULL */
	const char *path;
	const uint8_t *base;
	uint64_t size;
	struct gb_snapshot *s;
	const char *json;
	size_t json_len;
	size_t threads_cap;        /* room in s->threads */
};

/* One "gebpf: PATH: <why>" line; returns e. */
static int rfail(struct reader *rd, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(struct reader *rd, int e, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (rd->what)
		return gb_fail(e, "%s: %s: %s", rd->what, rd->path, why);
	return gb_fail(e, "%s: %s", rd->path, why);
}

static struct gb_snap_thread *last_thread(struct reader *rd)
{
	return rd->s->nthreads ? &rd->s->threads[rd->s->nthreads - 1] : NULL;
}

static int on_prstatus(struct reader *rd, const uint8_t *d, uint32_t len)
{
	struct elf_prstatus pr;
	if (len < sizeof(pr))
		return rfail(rd, -EINVAL, "NT_PRSTATUS note is %u bytes, expected %zu", len, sizeof(pr));
	memcpy(&pr, d, sizeof(pr));
	struct gb_snapshot *s = rd->s;
	if (GB_GROW(&s->threads, &rd->threads_cap, s->nthreads + 1))
		return -ENOMEM;
	struct gb_snap_thread *t = &s->threads[s->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = pr.pr_pid;
	t->cursig = pr.pr_cursig;
	t->sigpend = pr.pr_sigpend;
	t->sighold = pr.pr_sighold;
	memcpy(&t->regs, &pr.pr_reg, sizeof(t->regs));
	s->ps.ppid = pr.pr_ppid;
	s->ps.pgrp = pr.pr_pgrp;
	s->ps.sid = pr.pr_sid;
	return 0;
}

static int on_file(struct reader *rd, const uint8_t *d, uint32_t len)
{
	uint64_t count, page;
	if (len < 16)
		return rfail(rd, -EINVAL, "NT_FILE note too short");
	memcpy(&count, d, 8);
	memcpy(&page, d + 8, 8);
	if (count > (len - 16) / 24)
		return rfail(rd, -EINVAL, "NT_FILE note lists more files than it holds");
	const char *name = (const char *)d + 16 + count * 24, *end = (const char *)d + len;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t e[3];
		memcpy(e, d + 16 + i * 24, sizeof(e));
		size_t n = strnlen(name, (size_t)(end - name));
		if (name + n >= end)
			return rfail(rd, -EINVAL, "NT_FILE note: name %" PRIu64 " is not terminated", i);
		for (size_t j = 0; j < rd->s->nmaps; j++) {
			struct gb_snap_map *m = &rd->s->maps[j];
			if (m->start == e[0] && m->end == e[1]) {
				free(m->path);
				m->path = strndup(name, n);
				m->pgoff = e[2] * page;
			}
		}
		name += n + 1;
	}
	return 0;
}

static int on_note(struct reader *rd, const char *owner, uint32_t type, const uint8_t *d, uint32_t len)
{
	struct gb_snapshot *s = rd->s;
	struct gb_snap_thread *t = last_thread(rd);
	if (!strcmp(owner, "GEBPF")) {
		if (type == NT_GEBPF_JSON) {
			rd->json = (const char *)d;
			rd->json_len = len;
		}
		return 0;
	}
	if (!strcmp(owner, "LINUX")) {
		if (type == NT_X86_XSTATE && t) {
			free(t->xstate);
			t->xstate = malloc(len ? len : 1);
			if (!t->xstate)
				return rfail(rd, -ENOMEM, "out of memory");
			memcpy(t->xstate, d, len);
			t->xstate_len = len;
		}
		return 0;
	}
	if (strcmp(owner, "CORE"))
		return 0;
	switch (type) {
	case NT_PRSTATUS:
		return on_prstatus(rd, d, len);
	case NT_PRPSINFO: {
		struct elf_prpsinfo ps;
		if (len < sizeof(ps))
			return rfail(rd, -EINVAL, "NT_PRPSINFO note is %u bytes, expected %zu", len, sizeof(ps));
		memcpy(&ps, d, sizeof(ps));
		s->ps.state = ps.pr_sname;
		s->ps.nice = ps.pr_nice;
		s->ps.uid = ps.pr_uid;
		s->ps.gid = ps.pr_gid;
		s->meta.pid = ps.pr_pid;
		memcpy(s->ps.fname, ps.pr_fname, sizeof(ps.pr_fname));
		memcpy(s->ps.psargs, ps.pr_psargs, sizeof(ps.pr_psargs));
		return 0;
	}
	case NT_FPREGSET:
		if (t && len >= sizeof(t->fpregs))
			memcpy(&t->fpregs, d, sizeof(t->fpregs));
		return 0;
	case NT_SIGINFO:
		if (t)
			memcpy(t->siginfo, d, len < sizeof(t->siginfo) ? len : sizeof(t->siginfo));
		return 0;
	case NT_AUXV:
		free(s->auxv);
		s->auxv = malloc(len ? len : 1);
		if (!s->auxv)
			return rfail(rd, -ENOMEM, "out of memory");
		memcpy(s->auxv, d, len);
		s->auxv_len = len;
		return 0;
	case NT_FILE:
		return on_file(rd, d, len);
	}
	return 0;
}

static int read_notes(struct reader *rd, uint64_t off, uint64_t len)
{
	uint64_t p = off, end = off + len;
	while (p + sizeof(Elf64_Nhdr) <= end) {
		Elf64_Nhdr h;
		memcpy(&h, rd->base + p, sizeof(h));
		uint64_t name = p + sizeof(h);
		uint64_t desc = name + (((uint64_t)h.n_namesz + 3) & ~3ull);
		uint64_t next = desc + (((uint64_t)h.n_descsz + 3) & ~3ull);
		if (desc + h.n_descsz > end || h.n_namesz == 0 || h.n_namesz > 64)
			return rfail(rd, -EINVAL, "malformed note at file offset %" PRIu64, p);
		char owner[65];
		memcpy(owner, rd->base + name, h.n_namesz);
		owner[h.n_namesz] = 0;
		int r = on_note(rd, owner, h.n_type, rd->base + desc, h.n_descsz);
		if (r)
			return r;
		p = next;
	}
	return 0;
}

static int read_core(struct reader *rd)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)rd->base;
	if (rd->size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return rfail(rd, -EINVAL, "not an ELF file");
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64)
		return rfail(rd, -EINVAL, "not an x86-64 ELF file");
	if (eh->e_type != ET_CORE)
		return rfail(rd, -EINVAL, "an ELF file but not a core (e_type %u)", eh->e_type);
	/* The headers are read in place: they must be aligned (a core's are). */
	if (eh->e_phoff % 8 || eh->e_shoff % 8)
		return rfail(rd, -EINVAL, "misaligned program or section headers (offsets 0x%" PRIx64
			     ", 0x%" PRIx64 ")", (uint64_t)eh->e_phoff, (uint64_t)eh->e_shoff);
	uint64_t phnum = eh->e_phnum;
	if (phnum == PN_XNUM) {
		if (eh->e_shoff + sizeof(Elf64_Shdr) > rd->size)
			return rfail(rd, -EINVAL, "truncated (section 0 is past the end)");
		phnum = ((const Elf64_Shdr *)(rd->base + eh->e_shoff))->sh_info;
	}
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > rd->size ||
	    phnum > (rd->size - eh->e_phoff) / sizeof(Elf64_Phdr))
		return rfail(rd, -EINVAL, "truncated (program headers end past the file's %" PRIu64 " bytes)",
			     rd->size);
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(rd->base + eh->e_phoff);
	struct gb_snapshot *s = rd->s;
	size_t nload = 0;
	for (uint64_t i = 0; i < phnum; i++)
		nload += ph[i].p_type == PT_LOAD;
	s->maps = nload ? calloc(nload, sizeof(*s->maps)) : NULL;
	if (nload && !s->maps)
		return rfail(rd, -ENOMEM, "out of memory");
	for (uint64_t i = 0; i < phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		if (p->p_type != PT_LOAD && p->p_type != PT_NOTE)
			continue;
		if (p->p_offset > rd->size || p->p_filesz > rd->size - p->p_offset)
			return rfail(rd, -EINVAL, "truncated (segment %" PRIu64 " needs bytes up to %" PRIu64
				     ", the file has %" PRIu64 ")", i, p->p_offset + p->p_filesz, rd->size);
		if (p->p_type == PT_NOTE)
			continue;
		struct gb_snap_map *m = &s->maps[s->nmaps];
		if (s->nmaps && p->p_vaddr < s->maps[s->nmaps - 1].end)
			return rfail(rd, -EINVAL, "PT_LOAD %" PRIu64 " overlaps or is out of address order", i);
		s->nmaps++;
		m->start = p->p_vaddr;
		m->end = p->p_vaddr + p->p_memsz;
		m->core_off = p->p_offset;
		/* Only a fully stored map has bytes (kernel cores keep just the
		 * first page of some file maps). */
		m->data = p->p_filesz && p->p_filesz == p->p_memsz ? (uint8_t *)rd->base + p->p_offset : NULL;
		snprintf(m->perms, sizeof(m->perms), "%c%c%cp", p->p_flags & PF_R ? 'r' : '-',
			 p->p_flags & PF_W ? 'w' : '-', p->p_flags & PF_X ? 'x' : '-');
		m->path = strdup("");
		if (!m->path)
			return rfail(rd, -ENOMEM, "out of memory");
	}
	for (uint64_t i = 0; i < phnum; i++) {
		if (ph[i].p_type != PT_NOTE)
			continue;
		int r = read_notes(rd, ph[i].p_offset, ph[i].p_filesz);
		if (r)
			return r;
	}
	if (!s->nthreads)
		return rfail(rd, -EINVAL, "no NT_PRSTATUS note (no thread)");
	if (rd->json)
		return gb_snap__json_apply(s, rd->json, rd->json_len, rd->what, rd->path);
	return 0;
}

int gb_snapshot_load(const char *path, struct gb_snapshot **out, const char *what)
{
	struct reader rd = { .what = what, .path = path };
	struct stat st;
	int fd = -1, r;
	*out = NULL;
	rd.s = gb_snapshot_alloc();
	if (!rd.s)
		return rfail(&rd, -ENOMEM, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		r = rfail(&rd, -errno, "%s", strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		r = rfail(&rd, -EINVAL, "not a regular file");
		goto cleanup;
	}
	if (st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		r = rfail(&rd, -EINVAL, st.st_size ? "not an ELF core (too short)" : "empty file");
		goto cleanup;
	}
	/* Read-only: no memory is committed for the file, so a core of any size
	 * opens; gb_snapshot_write_memory makes the pages it changes writable. */
	void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED) {
		r = rfail(&rd, -errno, "mmap: %s", strerror(errno));
		goto cleanup;
	}
	rd.s->file_base = base;
	rd.s->file_len = (size_t)st.st_size;
	rd.base = base;
	rd.size = (uint64_t)st.st_size;
	r = read_core(&rd);
	if (r)
		goto cleanup;
	*out = rd.s;
	rd.s = NULL;
cleanup:
	if (fd >= 0)
		close(fd);
	gb_snapshot_free(rd.s);
	return r;
}
