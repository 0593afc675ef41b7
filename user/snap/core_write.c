/* The snapshot as an ELF core file.  The exact order of every part is the
 * contract in docs/snapshot-format.md; in short:
 *
 *   Elf64_Ehdr                      ET_CORE, EM_X86_64, e_phoff 64
 *   Elf64_Phdr[1 + nmaps]           PT_NOTE, then one PT_LOAD per map in address order
 *   notes                           NT_PRPSINFO; per thread NT_PRSTATUS, NT_FPREGSET,
 *                                   NT_X86_XSTATE (LINUX), NT_SIGINFO; NT_AUXV; NT_FILE;
 *                                   GEBPF NT_GEBPF_JSON (the JSON note)
 *   ".shstrtab" bytes, Elf64_Shdr[3] null, ".note0" (= PT_NOTE), ".shstrtab"
 *   zero padding to a 4096 boundary
 *   each readable map's bytes, in address order (all-zero pages are holes)
 *
 * Nothing but process state goes in: times, padding and unused fields are
 * zero, so the same state always gives the same bytes.  The data is copied
 * through fixed buffers, from the loaded file or the capture's source, and
 * hashed on the way (core_data.c).  The file is created unnamed (O_TMPFILE,
 * mode 0600), fsynced and linked into place (elsewhere: a temporary name,
 * renamed).
 */
#include "snap/snapshot.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <inttypes.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "snap/core_data.h"
#include "snap/note_json.h"

#define ALIGN(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))

static const char shstrtab[] = "\0.note0\0.shstrtab";  /* 18 bytes with the final NUL */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int buf_put(struct buf *b, const void *src, size_t n)
{
	if (GB_GROW(&b->p, &b->cap, b->len + n + 3))
		return -ENOMEM;
	if (src)
		memcpy(b->p + b->len, src, n);
	else
		memset(b->p + b->len, 0, n);
	b->len += n;
	return 0;
}

static int buf_pad4(struct buf *b)
{
	return buf_put(b, NULL, ALIGN(b->len, 4) - b->len);
}

static int note(struct buf *b, const char *owner, uint32_t type, const void *desc, size_t len)
{
	Elf64_Nhdr h = { .n_namesz = (uint32_t)strlen(owner) + 1, .n_descsz = (uint32_t)len, .n_type = type };
	int r = buf_put(b, &h, sizeof(h));
	if (!r)
		r = buf_put(b, owner, h.n_namesz);
	if (!r)
		r = buf_pad4(b);
	if (!r)
		r = buf_put(b, desc, len);
	if (!r)
		r = buf_pad4(b);
	return r;
}

static int note_psinfo(struct buf *b, const struct gb_snapshot *s)
{
	struct elf_prpsinfo ps;
	memset(&ps, 0, sizeof(ps));
	static const char states[] = "RSDTZW";
	const char *at = s->ps.state ? strchr(states, s->ps.state == 't' ? 'T' : s->ps.state) : NULL;
	ps.pr_state = at ? (char)(at - states) : 0;
	ps.pr_sname = s->ps.state;
	ps.pr_zomb = s->ps.state == 'Z';
	ps.pr_nice = (char)s->ps.nice;
	ps.pr_uid = s->ps.uid;
	ps.pr_gid = s->ps.gid;
	ps.pr_pid = s->meta.pid;
	ps.pr_ppid = s->ps.ppid;
	ps.pr_pgrp = s->ps.pgrp;
	ps.pr_sid = s->ps.sid;
	memcpy(ps.pr_fname, s->ps.fname, sizeof(ps.pr_fname));
	memcpy(ps.pr_psargs, s->ps.psargs, sizeof(ps.pr_psargs));
	return note(b, "CORE", NT_PRPSINFO, &ps, sizeof(ps));
}

static int note_thread(struct buf *b, const struct gb_snapshot *s, const struct gb_snap_thread *t)
{
	struct elf_prstatus pr;
	memset(&pr, 0, sizeof(pr));
	pr.pr_info.si_signo = t->cursig;
	pr.pr_cursig = (short)t->cursig;
	pr.pr_sigpend = t->sigpend;
	pr.pr_sighold = t->sighold;
	pr.pr_pid = t->tid;
	pr.pr_ppid = s->ps.ppid;
	pr.pr_pgrp = s->ps.pgrp;
	pr.pr_sid = s->ps.sid;
	memcpy(&pr.pr_reg, &t->regs, sizeof(pr.pr_reg));
	pr.pr_fpvalid = 1;
	int r = note(b, "CORE", NT_PRSTATUS, &pr, sizeof(pr));
	if (!r)
		r = note(b, "CORE", NT_FPREGSET, &t->fpregs, sizeof(t->fpregs));
	if (!r && t->xstate)
		r = note(b, "LINUX", NT_X86_XSTATE, t->xstate, t->xstate_len);
	if (!r)
		r = note(b, "CORE", NT_SIGINFO, t->siginfo, sizeof(t->siginfo));
	return r;
}

static bool is_file_map(const struct gb_snap_map *m)
{
	return m->path && m->path[0] == '/';
}

static int note_file(struct buf *b, const struct gb_snapshot *s)
{
	struct buf d = { 0 };
	uint64_t count = 0, page = GB_PAGE_SIZE;
	int r = 0;
	for (size_t i = 0; i < s->nmaps; i++)
		count += is_file_map(&s->maps[i]);
	r = buf_put(&d, &count, 8);
	if (!r)
		r = buf_put(&d, &page, 8);
	for (size_t i = 0; i < s->nmaps && !r; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		uint64_t e[3] = { m->start, m->end, m->pgoff / GB_PAGE_SIZE };
		if (is_file_map(m))
			r = buf_put(&d, e, sizeof(e));
	}
	for (size_t i = 0; i < s->nmaps && !r; i++)
		if (is_file_map(&s->maps[i]))
			r = buf_put(&d, s->maps[i].path, strlen(s->maps[i].path) + 1);
	if (!r)
		r = note(b, "CORE", NT_FILE, d.p, d.len);
	free(d.p);
	return r;
}

/* All notes; json may be a placeholder of the final length. */
static int build_notes(struct buf *b, const struct gb_snapshot *s, const char *json, size_t jlen)
{
	int r = note_psinfo(b, s);
	for (size_t i = 0; i < s->nthreads && !r; i++)
		r = note_thread(b, s, &s->threads[i]);
	if (!r)
		r = note(b, "CORE", NT_AUXV, s->auxv, s->auxv_len);
	if (!r)
		r = note_file(b, s);
	if (!r)
		r = note(b, "GEBPF", NT_GEBPF_JSON, json, jlen);
	return r;
}

struct layout {
	uint64_t phnum, notes_off, notes_len, shstr_off, sh_off, data_off, file_len;
};

static void place(struct gb_snapshot *s, struct layout *L)
{
	L->phnum = 1 + s->nmaps;
	L->notes_off = sizeof(Elf64_Ehdr) + L->phnum * sizeof(Elf64_Phdr);
	L->shstr_off = L->notes_off + L->notes_len;
	L->sh_off = ALIGN(L->shstr_off + sizeof(shstrtab), 8);
	L->data_off = ALIGN(L->sh_off + 3 * sizeof(Elf64_Shdr), GB_PAGE_SIZE);
	uint64_t off = L->data_off;
	for (size_t i = 0; i < s->nmaps; i++) {
		s->maps[i].core_off = off;
		if (gb_snap_map_has_bytes(&s->maps[i]))
			off += s->maps[i].end - s->maps[i].start;
	}
	L->file_len = off;
}

static int build_head(struct buf *h, const struct gb_snapshot *s, const struct layout *L,
		      const struct buf *notes)
{
	Elf64_Ehdr eh;
	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(Elf64_Ehdr);
	eh.e_shoff = L->sh_off;
	eh.e_ehsize = sizeof(Elf64_Ehdr);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = L->phnum >= PN_XNUM ? PN_XNUM : (Elf64_Half)L->phnum;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 3;
	eh.e_shstrndx = 2;
	int r = buf_put(h, &eh, sizeof(eh));

	Elf64_Phdr ph;
	memset(&ph, 0, sizeof(ph));
	ph.p_type = PT_NOTE;
	ph.p_offset = L->notes_off;
	ph.p_filesz = L->notes_len;
	ph.p_align = 4;
	if (!r)
		r = buf_put(h, &ph, sizeof(ph));
	for (size_t i = 0; i < s->nmaps && !r; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		memset(&ph, 0, sizeof(ph));
		ph.p_type = PT_LOAD;
		ph.p_offset = m->core_off;
		ph.p_vaddr = m->start;
		ph.p_filesz = gb_snap_map_has_bytes(m) ? m->end - m->start : 0;
		ph.p_memsz = m->end - m->start;
		ph.p_flags = (m->perms[0] == 'r' ? PF_R : 0) | (m->perms[1] == 'w' ? PF_W : 0) |
			     (m->perms[2] == 'x' ? PF_X : 0);
		ph.p_align = GB_PAGE_SIZE;
		r = buf_put(h, &ph, sizeof(ph));
	}
	if (!r)
		r = buf_put(h, notes->p, notes->len);
	if (!r)
		r = buf_put(h, shstrtab, sizeof(shstrtab));
	if (!r)
		r = buf_put(h, NULL, L->sh_off - (L->shstr_off + sizeof(shstrtab)));
	Elf64_Shdr sh[3];
	memset(sh, 0, sizeof(sh));
	if (L->phnum >= PN_XNUM)
		sh[0].sh_info = (Elf64_Word)L->phnum;
	sh[1].sh_name = 1;
	sh[1].sh_type = SHT_NOTE;
	sh[1].sh_offset = L->notes_off;
	sh[1].sh_size = L->notes_len;
	sh[1].sh_addralign = 4;
	sh[2].sh_name = 8;
	sh[2].sh_type = SHT_STRTAB;
	sh[2].sh_offset = L->shstr_off;
	sh[2].sh_size = sizeof(shstrtab);
	sh[2].sh_addralign = 1;
	if (!r)
		r = buf_put(h, sh, sizeof(sh));
	if (!r)
		r = buf_put(h, NULL, L->data_off - h->len);
	return r;
}

/* Lay out, copy the data (which may show a map to have no bytes, or pages
 * that could not be read: the layout then changes and the copy is redone),
 * then write the head. */
static int write_core(int fd, struct gb_snapshot *s, struct gb_snap_save_stats *st,
		      const char *path)
{
	struct buf notes = { 0 }, head = { 0 };
	struct layout L = { 0 };
	struct gb_core_data_stats cs = { 0 };
	struct gb_core_data *d = gb_core_data__new(fd, st && st->interruptible);
	char *json = NULL;
	size_t jlen = 0;
	int r = 0;

	if (!d) {
		r = -ENOMEM;
		goto cleanup;
	}
	for (int pass = 0;; pass++) {
		for (size_t i = 0; i < s->nmaps; i++)
			if (gb_snap_map_has_bytes(&s->maps[i])) {
				memset(s->maps[i].sha256, '0', 64);
				s->maps[i].sha256[64] = 0;
			}
		/* The JSON names file offsets that depend on its own length:
		 * iterate until the page-aligned data offset is stable. */
		L.data_off = 0;
		for (int iter = 0;; iter++) {
			uint64_t before = L.data_off;
			place(s, &L);
			free(json);
			json = gb_snap__json_build(s, &jlen);
			notes.len = 0;
			if (!json || (r = build_notes(&notes, s, json, jlen))) {
				r = -ENOMEM;
				goto cleanup;
			}
			L.notes_len = notes.len;
			place(s, &L);
			if (L.data_off == before || iter > 8)
				break;
		}
		if (pass && ftruncate(fd, 0)) {
			r = -errno;
			goto cleanup;
		}
		bool changed = false;
		for (size_t i = 0; i < s->nmaps; i++) {
			struct gb_snap_map *m = &s->maps[i];
			if (!gb_snap_map_has_bytes(m))
				continue;
			r = gb_core_data__copy(d, s, m);
			if (r < 0)
				goto cleanup;
			if (r == 1) {
				m->live = false;
				changed = true;
			}
		}
		if ((r = gb_core_data__drain(d, &cs)))
			goto cleanup;
		if (cs.failed) {
			char n[32], *was = NULL;
			for (size_t i = 0; i < s->nvars; i++)
				if (!strcmp(s->vars[i].key, "unreadable_pages"))
					was = s->vars[i].value;
			snprintf(n, sizeof(n), "%" PRIu64, cs.failed);
			if (!was || strcmp(was, n)) {
				changed = true;
				if ((r = gb_snapshot_set_var(s, "unreadable_pages", n)))
					goto cleanup;
			}
		}
		if (!changed || pass >= 3)
			break;
	}
	size_t jlen2;
	free(json);
	json = gb_snap__json_build(s, &jlen2);
	/* A map whose digest was not made (core_data.h) says null where the
	 * layout held 64 digits: the note keeps its size, padded with the
	 * spaces JSON allows after a value. */
	if (json && jlen2 < jlen) {
		char *p = realloc(json, jlen + 1);
		if (!p) {
			free(json);
		} else {
			memset(p + jlen2, ' ', jlen - jlen2);
			p[jlen] = 0;
			jlen2 = jlen;
		}
		json = p;
	}
	notes.len = 0;
	if (!json || jlen2 != jlen || build_notes(&notes, s, json, jlen) || notes.len != L.notes_len ||
	    build_head(&head, s, &L, &notes)) {
		r = -ENOMEM;
		goto cleanup;
	}
	r = gb_core_data__pwrite(fd, head.p, head.len, 0);
	if (!r && ftruncate(fd, (off_t)L.file_len))
		r = -errno;
	if (st) {
		st->bytes = cs.bytes;
		st->written = cs.written;
	}
cleanup:
	if (r)
		gb_err("%s: %s", path, r == -ESRCH ? "the process exited during the copy" :
				       r == -EINTR ? "interrupted: no file written" : strerror(-r));
	gb_core_data__free(d);
	free(json);
	free(notes.p);
	free(head.p);
	return r;
}

/* An unnamed file in path's directory (O_TMPFILE), else a temporary name
 * (*tmp, malloc'd). */
static int create_out(const char *path, char **tmp)
{
	char *d = strdup(path);
	if (!d)
		return gb_fail(-ENOMEM, "%s: out of memory", path);
	int fd = open(dirname(d), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	int e = errno;
	free(d);
	if (fd >= 0)
		return fd;
	if (e != EOPNOTSUPP && e != EISDIR && e != EINVAL)
		return gb_fail(-e, "%s: cannot create a file there: %s", path, strerror(e));
	if (asprintf(tmp, "%s.tmp.XXXXXX", path) < 0) {
		*tmp = NULL;
		return gb_fail(-ENOMEM, "%s: out of memory", path);
	}
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		free(*tmp);
		*tmp = NULL;
		return gb_fail(-e, "%s: cannot create a file there: %s", path, strerror(e));
	}
	return fd;
}

/* Give the unnamed file fd the name path, replacing what is there. */
static int link_out(int fd, const char *path)
{
	char proc[64], *tmp = NULL;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (!linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW))
		return 0;
	if (errno != EEXIST)
		return gb_fail(-errno, "%s: link: %s", path, strerror(errno));
	/* Replace atomically: link under a fresh name, rename over path. */
	for (unsigned i = 0; i < 100; i++) {
		free(tmp);
		if (asprintf(&tmp, "%s.tmp.%d.%u", path, (int)getpid(), i) < 0)
			return gb_fail(-ENOMEM, "%s: out of memory", path);
		if (!linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW))
			break;
		if (errno != EEXIST) {
			int e = errno;
			free(tmp);
			return gb_fail(-e, "%s: link: %s", path, strerror(e));
		}
	}
	int r = rename(tmp, path) ? -errno : 0;
	if (r) {
		gb_err("%s: rename: %s", path, strerror(-r));
		unlink(tmp);
	}
	free(tmp);
	return r;
}

int gb_snapshot_save(struct gb_snapshot *s, const char *path)
{
	return gb_snapshot_save_stats(s, path, NULL);
}

int gb_snapshot_save_stats(struct gb_snapshot *s, const char *path, struct gb_snap_save_stats *st)
{
	char *tmp = NULL, *dircopy = NULL;
	int fd, r;
	double t0 = gb_mono_s(), t1;
	if (s->src && !s->unwound)
		gb_snapshot_unwind(s);
	fd = create_out(path, &tmp);
	if (fd < 0) {
		r = fd;
		goto cleanup;
	}
	if (fchmod(fd, 0600)) {
		r = gb_fail(-errno, "%s: chmod: %s", path, strerror(errno));
		goto cleanup;
	}
	r = write_core(fd, s, st, path);
	if (r)
		goto cleanup;
	t1 = gb_mono_s();
	if (fsync(fd)) {
		r = gb_fail(-errno, "%s: fsync: %s", path, strerror(errno));
		goto cleanup;
	}
	if (tmp) {
		if (rename(tmp, path)) {
			r = gb_fail(-errno, "%s: rename: %s", path, strerror(errno));
			goto cleanup;
		}
		free(tmp);
		tmp = NULL;
	} else if ((r = link_out(fd, path))) {
		goto cleanup;
	}
	/* Make the name itself durable. */
	dircopy = strdup(path);
	if (dircopy) {
		int dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	if (st) {
		st->copy_s = t1 - t0;
		st->sync_s = gb_mono_s() - t1;
	}
	r = 0;
cleanup:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(dircopy);
	return r;
}
