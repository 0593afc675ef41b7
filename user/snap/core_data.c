/* The data part of a core file (core_data.h). */
#include "snap/core_data.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/sigflag.h"
#include "snap/source.h"

#define NJOB 64

/* A hash job: bytes to add (from buffer buf, or -1: memory that stays put),
 * or the end of a map (final: where its hex digest goes). */
struct job {
	const uint8_t *p;
	uint64_t len;
	int buf;
	char *final;
};

struct gb_core_data {
	int fd;
	bool interruptible;
	uint8_t *bufs[GB_CORE_DATA_NBUF];
	bool busy[GB_CORE_DATA_NBUF];
	struct job q[NJOB];
	uint64_t head, tail;       /* next job to hash, next free slot */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool threaded, stop;
	EVP_MD_CTX *md;
	char unused_digest[65];    /* the end of a map not hashed */
	int hash_err;
	struct gb_core_data_stats st;
};

static uint8_t zeros[GB_SNAP_SRC_CHUNK];   /* never written: costs no memory */

static void hash_job(struct gb_core_data *d, const struct job *j)
{
	unsigned char md[32];
	unsigned len = 0;
	if (!j->final) {
		if (!EVP_DigestUpdate(d->md, j->p, j->len))
			d->hash_err = -ENOMEM;
		return;
	}
	if (!EVP_DigestFinal_ex(d->md, md, &len) || len != 32 || !EVP_DigestInit_ex(d->md, EVP_sha256(), NULL))
		d->hash_err = -ENOMEM;
	for (int i = 0; i < 32; i++)
		snprintf(j->final + 2 * i, 3, "%02x", md[i]);
}

static void *hasher(void *arg)
{
	struct gb_core_data *d = arg;
	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (d->head == d->tail && !d->stop)
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->head == d->tail)
			break;
		struct job j = d->q[d->head % NJOB];
		pthread_mutex_unlock(&d->mu);
		hash_job(d, &j);
		pthread_mutex_lock(&d->mu);
		d->head++;
		if (j.buf >= 0)
			d->busy[j.buf] = false;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static void put(struct gb_core_data *d, struct job j)
{
	if (!d->threaded) {
		hash_job(d, &j);
		if (j.buf >= 0)
			d->busy[j.buf] = false;
		return;
	}
	pthread_mutex_lock(&d->mu);
	while (d->tail - d->head == NJOB)
		pthread_cond_wait(&d->cv, &d->mu);
	d->q[d->tail++ % NJOB] = j;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static int get_buf(struct gb_core_data *d)
{
	int b = -1;
	pthread_mutex_lock(&d->mu);
	for (;;) {
		for (int i = 0; i < GB_CORE_DATA_NBUF && b < 0; i++)
			if (!d->busy[i])
				b = i;
		if (b >= 0)
			break;
		pthread_cond_wait(&d->cv, &d->mu);
	}
	d->busy[b] = true;
	pthread_mutex_unlock(&d->mu);
	return b;
}

struct gb_core_data *gb_core_data__new(int fd, bool interruptible)
{
	struct gb_core_data *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->fd = fd;
	d->interruptible = interruptible;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->md = EVP_MD_CTX_new();
	bool ok = d->md && EVP_DigestInit_ex(d->md, EVP_sha256(), NULL);
	for (int i = 0; i < GB_CORE_DATA_NBUF && ok; i++)
		ok = (d->bufs[i] = malloc(GB_SNAP_SRC_CHUNK)) != NULL;
	if (!ok) {
		gb_core_data__free(d);
		return NULL;
	}
	d->threaded = pthread_create(&d->th, NULL, hasher, d) == 0;
	return d;
}

void gb_core_data__free(struct gb_core_data *d)
{
	if (!d)
		return;
	if (d->threaded) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->th, NULL);
	}
	for (int i = 0; i < GB_CORE_DATA_NBUF; i++)
		free(d->bufs[i]);
	EVP_MD_CTX_free(d->md);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

int gb_core_data__drain(struct gb_core_data *d, struct gb_core_data_stats *st)
{
	pthread_mutex_lock(&d->mu);
	while (d->head != d->tail)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	if (st)
		*st = d->st;
	memset(&d->st, 0, sizeof(d->st));
	return d->hash_err;
}

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)p;
	if (q[0] | q[511])
		return false;
	uint64_t acc = 0;
	for (size_t i = 0; i < GB_PAGE_SIZE / 8; i++)
		acc |= q[i];
	return acc == 0;
}

int gb_core_data__pwrite(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (uint64_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Write the non-zero pages of p[0, len) at off (zero pages stay holes). */
static int write_pages(struct gb_core_data *d, const uint8_t *p, uint64_t len, uint64_t off)
{
	for (uint64_t o = 0; o < len; o += GB_PAGE_SIZE) {
		if (page_is_zero(p + o))
			continue;
		uint64_t e = o + GB_PAGE_SIZE;
		while (e < len && !page_is_zero(p + e))
			e += GB_PAGE_SIZE;
		int r = gb_core_data__pwrite(d->fd, p + o, e - o, off + o);
		if (r)
			return r;
		d->st.written += e - o;
		o = e;
	}
	return 0;
}

static void release_buf(struct gb_core_data *d, int b)
{
	if (b < 0)
		return;
	pthread_mutex_lock(&d->mu);
	d->busy[b] = false;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

int gb_core_data__copy(struct gb_core_data *d, struct gb_snapshot *s, struct gb_snap_map *m)
{
	uint64_t size = m->end - m->start, failed = 0, unpopulated = 0;
	int64_t got = 0;
	int r = 0;
	bool hashing = true;
	for (uint64_t off = 0; off < size && !r; off += GB_SNAP_SRC_CHUNK) {
		uint64_t len = size - off < GB_SNAP_SRC_CHUNK ? size - off : GB_SNAP_SRC_CHUNK;
		struct job j = { .len = len, .buf = -1 };
		bool holes = false;
		if (d->interruptible && gb_sigflag_stop()) {
			r = -EINTR; /* Ctrl-C, SIGTERM: no file (docs/snap.md) */
			break;
		}
		if (m->data) {
			j.p = m->data + off;
			got += (int64_t)(len / GB_PAGE_SIZE);
		} else {
			j.buf = get_buf(d);
			int64_t n = gb_snap_src__read(s->src, m, off, d->bufs[j.buf], len, &holes, &failed);
			if (n < 0) {
				r = (int)n;
				release_buf(d, j.buf);  /* never queued */
				break;
			}
			got += n;
			j.p = holes ? zeros : d->bufs[j.buf];
		}
		if (!holes)
			r = write_pages(d, j.p, len, m->core_off + off);
		/* Start the writeback now, so that the fsync at the end has
		 * little left to wait for. */
		if (!r && !holes)
			sync_file_range(d->fd, (off_t)(m->core_off + off), (off_t)len, SYNC_FILE_RANGE_WRITE);
		/* Hashing a never-populated stretch is hashing zeros, ~0.6 s
		 * of CPU per GiB: past GB_CORE_DATA_HASH_HOLES the map gets no
		 * digest (a NORESERVE heap, a sanitizer's shadow). */
		if (holes && (unpopulated += len) > GB_CORE_DATA_HASH_HOLES)
			hashing = false;
		if (hashing)
			put(d, j);
		else
			release_buf(d, j.buf);
	}
	/* Always end the map's hash, so that the next map starts afresh. */
	put(d, (struct job){ .buf = -1, .final = hashing ? m->sha256 : d->unused_digest });
	if (!hashing)
		m->sha256[0] = 0;
	if (r)
		return r;
	if (!m->data && !m->sparse && got == 0)
		return 1;
	d->st.failed += m->spilled ? m->failed : failed;
	d->st.bytes += size;
	return 0;
}
