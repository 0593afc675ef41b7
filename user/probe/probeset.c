/* The probe trap's probes: which file offsets are probed, the bytes the
 * int3s hide, where they are in the process now, and their uprobes
 * (uprobe_multi links on 6.10+, one perf event each before).  API:
 * probetrap.h; shared state: probetrap_int.h. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/sort.h"
#include "probe/probetrap_int.h"
#include "probe/umulti.h"
#include "ptrace/maps.h"
#include "probetrap.skel.h"

/* The kernel's ENOTSUPP (not in libc's errno.h): an instruction uprobes
 * cannot run out of line or emulate. */
#define KERNEL_ENOTSUPP 524

static int kerr(int err)
{
	return err == -KERNEL_ENOTSUPP ? -ENOTSUP : err;
}

static struct probetrap_probe *find_probe(struct gb_probetrap *p, dev_t dev, ino_t ino, uint64_t off)
{
	for (size_t i = 0; i < p->npr; i++)
		if (p->pr[i].ino == ino && p->pr[i].dev == dev && p->pr[i].off == off)
			return &p->pr[i];
	return NULL;
}


static void set_muted(struct gb_probetrap *p, struct probetrap_probe *pr, bool on)
{
	int fd = bpf_map__fd(p->skel->maps.muted);
	__u8 one = 1;

	if (on)
		bpf_map_update_elem(fd, &pr->id, &one, BPF_ANY);
	else
		bpf_map_delete_elem(fd, &pr->id);
	pr->muted = on;
	p->gr[pr->group].live += on ? -1u : 1u;
}

/* One perf-event uprobe per probe: raise the open-file limit once when
 * hundreds of them exceed it. */
static struct bpf_link *attach_one(struct gb_probetrap *p, const char *path, uint64_t off)
{
	struct bpf_link *l;
	struct rlimit r;

	for (;;) {
		l = bpf_program__attach_uprobe(p->skel->progs.gb_probe_hit, false, p->tgid, path,
					       (size_t)off);
		if (l || errno != EMFILE || p->nofile_raised || getrlimit(RLIMIT_NOFILE, &r) ||
		    r.rlim_cur >= r.rlim_max)
			return l;
		p->nofile_raised = true;
		r.rlim_cur = r.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &r))
			return NULL;
	}
}

/* Attach probes pr[0..n): all or none.  0 or -errno. */
static int attach(struct gb_probetrap *p, struct probetrap_probe *pr, size_t n)
{
	int err = 0;

	if (p->multi) {
		uint64_t *offs = calloc(n, sizeof(*offs)), *ids = calloc(n, sizeof(*ids));
		int fd;

		if (!offs || !ids || gb_grow((void **)&p->gr, &p->capgr, p->ngr + 1, sizeof(*p->gr))) {
			free(offs);
			free(ids);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			offs[i] = pr[i].off;
			ids[i] = pr[i].id;
		}
		fd = gb_umulti_attach(bpf_program__fd(p->skel->progs.gb_probe_hit), pr[0].path, offs,
				      ids, n, p->tgid);
		free(offs);
		free(ids);
		if (fd < 0)
			return kerr(fd);
		p->gr[p->ngr] = (struct group){ .fd = fd, .live = (unsigned)n };
		for (size_t i = 0; i < n; i++)
			pr[i].group = (int)p->ngr;
		p->ngr++;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		pr[i].link = attach_one(p, pr[i].path, pr[i].off);
		if (!pr[i].link) {
			err = kerr(errno ? -errno : -EINVAL);
			while (i-- > 0) {
				bpf_link__destroy(pr[i].link);
				pr[i].link = NULL;
			}
			return err;
		}
	}
	return 0;
}

int gb_probetrap__add_many(struct gb_probetrap *p, const char *path, const uint64_t *offs,
			   size_t n)
{
	char real[PATH_MAX];
	struct probetrap_probe *fresh = NULL;
	uint64_t *sorted = NULL;
	size_t nf = 0;
	struct stat st;
	int fd, err = 0;

	if (!p || !path || (n && !offs))
		return -EINVAL;
	if (n == 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	sorted = malloc(n * sizeof(*sorted));
	fresh = calloc(n, sizeof(*fresh));
	if (!sorted || !fresh || fstat(fd, &st)) {
		err = sorted && fresh ? -errno : -ENOMEM;
		goto out;
	}
	memcpy(sorted, offs, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), gb_cmp_u64);
	for (size_t i = 0; i < n; i++) {
		struct probetrap_probe *old = find_probe(p, st.st_dev, st.st_ino, sorted[i]);
		if ((i && sorted[i] == sorted[i - 1]) || (old && !old->muted)) {
			err = -EEXIST;
			goto out;
		}
		if (old)
			continue;       /* removed, int3 still there: unmuted below */
		struct probetrap_probe *f = &fresh[nf++];
		f->off = sorted[i];
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		f->group = -1;
		f->id = ++p->next_id;
		if (pread(fd, &f->orig, 1, (off_t)f->off) != 1) {
			err = -EINVAL;  /* beyond the end of the file */
			goto out;
		}
		f->path = strdup(path);
		f->real = strdup(realpath(path, real) ? real : path);
		if (!f->path || !f->real) {
			err = -ENOMEM;
			goto out;
		}
	}
	double t0 = gb_mono_s();
	if (nf && ((err = gb_grow((void **)&p->pr, &p->capr, p->npr + nf, sizeof(*p->pr))) ||
		   (err = attach(p, fresh, nf))))
		goto out;
	if (nf && !p->silent)
		gb_info("probe trap: %zu probes in %s attached in %.1f ms (%s)", nf, path,
			(gb_mono_s() - t0) * 1e3,
			p->multi ? "one uprobe_multi link" : "perf-event uprobes");
	for (size_t i = 0; i < n; i++) {
		struct probetrap_probe *old = find_probe(p, st.st_dev, st.st_ino, sorted[i]);
		if (old && old->muted)
			set_muted(p, old, false);
	}
	memcpy(&p->pr[p->npr], fresh, nf * sizeof(*fresh));
	p->npr += nf;
	nf = 0;
	p->rt_valid = false;
out:
	for (size_t i = 0; i < nf; i++) {
		free(fresh[i].path);
		free(fresh[i].real);
	}
	free(fresh);
	free(sorted);
	close(fd);
	return err;
}

int gb_probetrap__add(struct gb_probetrap *p, const char *path, uint64_t file_offset)
{
	return gb_probetrap__add_many(p, path, &file_offset, 1);
}

/* Drop pr[i] from the set (its uprobe is gone). */
static void drop(struct gb_probetrap *p, size_t i)
{
	if (p->multi)
		bpf_map_delete_elem(bpf_map__fd(p->skel->maps.muted), &p->pr[i].id);
	free(p->pr[i].path);
	free(p->pr[i].real);
	p->pr[i] = p->pr[--p->npr];
	p->rt_valid = false;
}

int gb_probetrap__remove(struct gb_probetrap *p, const char *path, uint64_t file_offset)
{
	struct probetrap_probe *pr;
	struct stat st;
	int g;

	if (!p || !path)
		return -EINVAL;
	if (stat(path, &st) != 0)
		return -errno;
	pr = find_probe(p, st.st_dev, st.st_ino, file_offset);
	if (!pr || pr->muted)
		return -ENOENT;
	if (!p->multi) {
		bpf_link__destroy(pr->link);
		drop(p, (size_t)(pr - p->pr));
		return 0;
	}
	/* Muted at once; the link goes when none of its probes is left. */
	set_muted(p, pr, true);
	g = pr->group;
	if (p->gr[g].live)
		return 0;
	close(p->gr[g].fd);
	p->gr[g].fd = -1;
	for (size_t i = p->npr; i-- > 0;)
		if (p->pr[i].group == g)
			drop(p, i);
	return 0;
}

unsigned gb_probetrap_live_probes(const struct gb_probetrap *p)
{
	unsigned n = 0;

	for (size_t i = 0; i < p->npr; i++)
		n += !p->pr[i].muted;
	return n;
}

void gb_probetrap_detach_all(struct gb_probetrap *p)
{
	double t0 = gb_mono_s();
	size_t n = p->npr;
	for (size_t g = 0; g < p->ngr; g++)
		if (p->gr[g].fd >= 0)
			close(p->gr[g].fd);
	for (size_t i = 0; i < p->npr; i++) {
		bpf_link__destroy(p->pr[i].link);
		free(p->pr[i].path);
		free(p->pr[i].real);
	}
	free(p->pr);
	free(p->gr);
	p->pr = NULL;
	p->gr = NULL;
	p->npr = p->ngr = 0;
	if (n && !p->silent)
		gb_info("probe trap: %zu probes detached in %.1f ms", n, (gb_mono_s() - t0) * 1e3);
}
/* --- runtime addresses --------------------------------------------------- */

static int cmp_rt(const void *a, const void *b)
{
	const struct rt *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool same_file(const struct probetrap_probe *pr, const struct gb_map *m)
{
	if (m->inode != (uint64_t)pr->ino)
		return false;
	/* overlayfs shows the underlying device in maps: the path decides. */
	return (m->dev_major == major(pr->dev) && m->dev_minor == minor(pr->dev)) ||
	       !strcmp(m->path, pr->real);
}

/* Every probe's runtime address(es), from /proc/PID/maps. */
static int refresh_rt(struct gb_probetrap *p)
{
	struct gb_maps m = { 0 };
	struct rt *v = NULL;
	size_t n = 0, cap = 0;
	int err = gb_maps_read(p->tgid, &m);

	if (err)
		return err;
	for (size_t i = 0; i < m.n; i++) {
		const struct gb_map *mp = &m.v[i];
		for (size_t j = 0; j < p->npr; j++) {
			const struct probetrap_probe *pr = &p->pr[j];
			if (pr->off < mp->offset || pr->off - mp->offset >= mp->end - mp->start ||
			    !same_file(pr, mp))
				continue;
			if (GB_GROW(&v, &cap, n + 1)) {
				free(v);
				gb_maps_free(&m);
				return -ENOMEM;
			}
			v[n].addr = mp->start + (pr->off - mp->offset);
			v[n].orig = pr->orig;
			n++;
		}
	}
	gb_maps_free(&m);
	qsort(v, n, sizeof(*v), cmp_rt);
	free(p->rt);
	p->rt = v;
	p->nrt = n;
	p->rt_valid = true;
	return 0;
}

/* Index of the first runtime address >= addr. */
static size_t rt_lower(const struct gb_probetrap *p, uint64_t addr)
{
	return GB_LOWER(p->rt, p->nrt, addr, addr);
}

static bool in_rt(const struct gb_probetrap *p, uint64_t addr)
{
	size_t i = rt_lower(p, addr);
	return i < p->nrt && p->rt[i].addr == addr;
}

bool gb_probetrap_is_probed(struct gb_probetrap *p, uint64_t addr)
{
	if (!p->rt_valid && refresh_rt(p) != 0)
		return false;
	if (in_rt(p, addr))
		return true;
	/* perhaps in a module mapped since the last look */
	return refresh_rt(p) == 0 && in_rt(p, addr);
}

void gb_probetrap__maps_changed(struct gb_probetrap *p)
{
	if (!p)
		return;
	p->rt_valid = false;
	p->nplain = 0;
}

/* 0xCC bytes of the program's own (no probe there after a fresh look at
 * the maps): remembered, so that they cost one re-read of the maps each. */
#define PLAIN_MAX 4096

static bool is_plain(const struct gb_probetrap *p, uint64_t a)
{
	for (size_t i = 0; i < p->nplain; i++)
		if (p->plain[i] == a)
			return true;
	return false;
}

static size_t restore(struct gb_probetrap *p, uint64_t addr, uint8_t *buf, size_t len)
{
	size_t fixed = 0;

	for (size_t i = rt_lower(p, addr); i < p->nrt && p->rt[i].addr - addr < len; i++) {
		uint8_t *b = &buf[p->rt[i].addr - addr];
		if (*b == 0xCC && p->rt[i].orig != 0xCC) {
			*b = p->rt[i].orig;
			fixed++;
		}
	}
	return fixed;
}

int gb_probetrap__orig_bytes(struct gb_probetrap *p, uint64_t addr, uint8_t *buf, size_t len)
{
	size_t fixed;
	int err;

	if (!p || !buf)
		return -EINVAL;
	if (!p->rt_valid && (err = refresh_rt(p)) != 0)
		return err;
	fixed = restore(p, addr, buf, len);
	/* An int3 the cache does not explain: a module mapped since the last
	 * look may hold a probe there.  Look again, once. */
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != 0xCC || is_plain(p, addr + i))
			continue;
		if ((err = refresh_rt(p)) != 0)
			return err;
		fixed += restore(p, addr, buf, len);
		for (size_t j = i; j < len && p->nplain < PLAIN_MAX; j++)
			if (buf[j] == 0xCC && !is_plain(p, addr + j) &&
			    gb_grow((void **)&p->plain, &p->capplain, p->nplain + 1,
				 sizeof(*p->plain)) == 0)
				p->plain[p->nplain++] = addr + j;
		break;
	}
	return (int)fixed;
}


/* --- after an exec from another thread than the main one ----------------- */

/* A new uprobe_multi link for the probes of group g (muted ones too: their
 * cookies stay muted), then the old one closed. */
static int relink(struct gb_probetrap *p, size_t g)
{
	uint64_t *offs = calloc(p->npr + 1, sizeof(*offs)), *ids = calloc(p->npr + 1, sizeof(*ids));
	const char *path = NULL;
	size_t n = 0;
	int fd = -ENOMEM;

	for (size_t i = 0; offs && ids && i < p->npr; i++)
		if (p->pr[i].group == (int)g) {
			offs[n] = p->pr[i].off;
			ids[n++] = p->pr[i].id;
			path = p->pr[i].path;
		}
	if (offs && ids)
		fd = path ? gb_umulti_attach(bpf_program__fd(p->skel->progs.gb_probe_hit), path,
					     offs, ids, n, p->tgid) : -ENOENT;
	free(offs);
	free(ids);
	if (fd < 0)
		return kerr(fd);
	close(p->gr[g].fd);
	p->gr[g].fd = fd;
	return 0;
}

/* The file at pr's path is still the one probed (by path, not inode, the
 * kernel attaches). */
static bool still_there(const struct probetrap_probe *pr)
{
	struct stat st;
	return stat(pr->path, &st) == 0 && st.st_dev == pr->dev && st.st_ino == pr->ino;
}

int gb_probetrap__reattach(struct gb_probetrap *p)
{
	double t0 = gb_mono_s();
	int err = 0;

	if (!p)
		return 0;
	for (size_t i = 0; !err && i < p->npr; i++)
		if (!still_there(&p->pr[i]))
			err = -ESTALE;
	for (size_t g = 0; p->multi && !err && g < p->ngr; g++)
		if (p->gr[g].fd >= 0)
			err = relink(p, g);
	for (size_t i = 0; !p->multi && !err && i < p->npr; i++) {
		struct bpf_link *l = attach_one(p, p->pr[i].path, p->pr[i].off);
		if (!l) {
			err = kerr(errno ? -errno : -EINVAL);
			break;
		}
		bpf_link__destroy(p->pr[i].link);
		p->pr[i].link = l;
	}
	p->rt_valid = false;
	if (!err)
		gb_info("probe trap: %zu probes attached again for pid %d (an exec from another "
			"thread than the main one) in %.1f ms", p->npr, (int)p->tgid,
			(gb_mono_s() - t0) * 1e3);
	return err;
}
