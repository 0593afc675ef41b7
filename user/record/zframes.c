/* Lines into zstd frames with a seek table: see zframes.h. */
#include "zframes.h"
#include "numfmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#ifdef __SSE2__
#endif

#define MAX_FRAME_BYTES (1u << 30) /* keeps a frame's sizes in the table's u32 */
#define MAX_FRAMES 0x8000000u      /* the seekable format's limit */

struct entry {
	uint32_t csize, dsize;
	uint64_t lines;
};

struct gb_zframes {
	ZSTD_CCtx *cctx;
	gb_zframes_emit_fn emit;
	void *ctx;
	size_t frame_bytes;
	char *out;                 /* the frame in progress, compressed so far */
	size_t out_len, out_cap;
	uint64_t in_bytes, lines;  /* ... its input */
	struct entry *ents;        /* frames in the output */
	size_t nents, ents_cap;
	int dead;                  /* libzstd failed */
};


static int reserve_out(struct gb_zframes *z, size_t more)
{
	if (z->out_cap - z->out_len >= more)
		return 0;
	size_t cap = z->out_cap ? z->out_cap : 1;
	while (cap - z->out_len < more)
		cap *= 2;
	char *n = realloc(z->out, cap);
	if (!n)
		return -ENOMEM;
	z->out = n;
	z->out_cap = cap;
	return 0;
}

/* Feed in[0..len) with the directive; the output goes to z->out. */
static int feed(struct gb_zframes *z, const void *in, size_t len, ZSTD_EndDirective dir)
{
	ZSTD_inBuffer ib = { in, len, 0 };
	for (;;) {
		int e = reserve_out(z, ZSTD_CStreamOutSize());
		if (e)
			return e;
		ZSTD_outBuffer ob = { z->out, z->out_cap, z->out_len };
		size_t r = ZSTD_compressStream2(z->cctx, &ob, &ib, dir);
		z->out_len = ob.pos;
		if (ZSTD_isError(r)) {
			z->dead = 1;
			return -EIO;
		}
		if (dir == ZSTD_e_end ? r == 0 : ib.pos == ib.size)
			return 0;
	}
}

static void le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

struct gb_zframes *gb_zframes__new(const struct gb_zframes_opts *o, gb_zframes_emit_fn emit,
				   void *ctx)
{
	struct gb_zframes *z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	z->emit = emit;
	z->ctx = ctx;
	z->frame_bytes = o && o->frame_bytes ? o->frame_bytes : GB_ZFRAMES_FRAME_BYTES;
	if (z->frame_bytes > MAX_FRAME_BYTES)
		z->frame_bytes = MAX_FRAME_BYTES;
	int level = o && o->level ? o->level : GB_ZFRAMES_LEVEL;
	z->cctx = ZSTD_createCCtx();
	if (!z->cctx) {
		free(z);
		errno = ENOMEM;
		return NULL;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1)) ||
	    (o && o->workers &&
	     ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers, o->workers)))) {
		gb_zframes__free(z);
		errno = EINVAL;
		return NULL;
	}
	return z;
}

uint64_t gb_zframes__pending(const struct gb_zframes *z)
{
	return z->in_bytes;
}

int gb_zframes__end_frame(struct gb_zframes *z)
{
	if (z->dead)
		return -EIO;
	if (!z->in_bytes)
		return 0;
	int e = feed(z, "", 0, ZSTD_e_end);
	if (e)
		return e;
	if (z->nents == z->ents_cap) {
		size_t cap = z->ents_cap ? 2 * z->ents_cap : 64;
		struct entry *n = realloc(z->ents, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		z->ents = n;
		z->ents_cap = cap;
	}
	struct gb_zframe f = { z->out, z->out_len, z->in_bytes, z->lines, 0 };
	z->out_len = 0;
	z->in_bytes = z->lines = 0;
	e = z->emit(z->ctx, &f);
	if (!e)
		z->ents[z->nents++] = (struct entry){ (uint32_t)f.size, (uint32_t)f.in_bytes, f.lines };
	return e;
}

int gb_zframes__write(struct gb_zframes *z, const void *buf, size_t len)
{
	return gb_zframes__write_n(z, buf, len, UINT64_MAX);
}

int gb_zframes__write_n(struct gb_zframes *z, const void *buf, size_t len, uint64_t lines)
{
	const char *p = buf;
	int first = 0;
	while (len && !z->dead) {
		size_t room = z->in_bytes < z->frame_bytes ? z->frame_bytes - z->in_bytes : 1;
		size_t n = len;
		int end = 0;
		if (len >= room) {
			/* up to the first line end at or past frame_bytes */
			const char *nl = memchr(p + room - 1, '\n', len - (room - 1));
			if (nl) {
				n = (size_t)(nl - p) + 1;
				end = 1;
			}
		}
		int e = feed(z, p, n, ZSTD_e_continue);
		if (e)
			return first ? first : e;
		z->in_bytes += n;
		uint64_t pl;
		if (lines == UINT64_MAX) {
			pl = gb_numfmt_lines(p, n);
		} else { /* (the smaller part counted, the other's the rest) */
			pl = n == len ? lines : n <= len - n ? gb_numfmt_lines(p, n)
							      : lines - gb_numfmt_lines(p + n, len - n);
			lines -= pl;
		}
		z->lines += pl;
		p += n;
		len -= n;
		if (end && (e = gb_zframes__end_frame(z)) && !first)
			first = e;
	}
	return z->dead && !first ? -EIO : first;
}

int gb_zframes__drop_last(struct gb_zframes *z, struct gb_zframe *f)
{
	if (!z->nents)
		return -ENOENT;
	struct entry *e = &z->ents[--z->nents];
	*f = (struct gb_zframe){ NULL, e->csize, e->dsize, e->lines, 0 };
	return 0;
}

int gb_zframes__finish(struct gb_zframes *z)
{
	int first = gb_zframes__end_frame(z);
	if (z->dead)
		return first ? first : -EIO;
	if (z->nents > MAX_FRAMES)
		return first; /* no table: the format cannot hold them all */
	size_t n = 8 + z->nents * 8 + 9;
	unsigned char *t = malloc(n), *q = t;
	if (!t)
		return first ? first : -ENOMEM;
	le32(q, GB_ZFRAMES_SKIP_MAGIC);
	le32(q + 4, (uint32_t)(n - 8));
	q += 8;
	for (size_t i = 0; i < z->nents; i++, q += 8) {
		le32(q, z->ents[i].csize);
		le32(q + 4, z->ents[i].dsize);
	}
	le32(q, (uint32_t)z->nents);
	q[4] = 0; /* descriptor: no checksums (each frame carries zstd's own) */
	le32(q + 5, GB_ZFRAMES_SEEK_MAGIC);
	struct gb_zframe f = { t, n, 0, 0, 1 };
	int e = z->emit(z->ctx, &f);
	free(t);
	return first ? first : e;
}

void gb_zframes__totals(const struct gb_zframes *z, struct gb_zframes_totals *t)
{
	*t = (struct gb_zframes_totals){ 0 };
	t->frames = z->nents;
	for (size_t i = 0; i < z->nents; i++) {
		t->out_bytes += z->ents[i].csize;
		t->in_bytes += z->ents[i].dsize;
		t->lines += z->ents[i].lines;
	}
}

void gb_zframes__free(struct gb_zframes *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->cctx);
	free(z->out);
	free(z->ents);
	free(z);
}
