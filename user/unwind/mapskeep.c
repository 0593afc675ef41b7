/* The maps keeper: see mapskeep.h. */
#include "unwind/mapskeep.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/hash.h"

struct kept {
	pid_t pid;
	bool prepared;
	bool gone;             /* its maps read empty or missing: not read again */
	uint64_t sample_ns;    /* its newest sample */
	char *text;            /* the last non-empty maps read */
	size_t len;
	uint64_t hash, gen;
	uint64_t read_ns;      /* when it was read */
};

struct gb_mapskeep {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool stop;
	uint64_t every_ns, active_ns, gen;
	struct kept *v;
	size_t n, cap;
};

static struct kept *find(struct gb_mapskeep *k, pid_t pid)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->v[i].pid == pid)
			return &k->v[i];
	return NULL;
}

/* /proc/PID/maps as text (malloc'd, *len 0 when empty or gone). */
static char *read_maps(pid_t pid, size_t *len)
{
	char path[32], buf[8192], *text = NULL;
	size_t n;
	FILE *f, *mem;

	*len = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	mem = open_memstream(&text, len);
	if (!mem) {
		fclose(f);
		return NULL;
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(f);
	fclose(mem);
	return text;
}

void gb_mapskeep_round(struct gb_mapskeep *k)
{
	uint64_t now = gb_mono_ns();
	pid_t *pids;
	size_t n = 0;

	pthread_mutex_lock(&k->lock);
	pids = malloc((k->n ? k->n : 1) * sizeof(*pids));
	for (size_t i = 0; pids && i < k->n; i++) {
		const struct kept *e = &k->v[i];
		if (!e->gone && (e->prepared || now - e->sample_ns <= k->active_ns))
			pids[n++] = e->pid;
	}
	pthread_mutex_unlock(&k->lock);
	/* (read without the lock: the drain's watch calls never wait on a read) */
	for (size_t i = 0; i < n; i++) {
		size_t len;
		uint64_t at = gb_mono_ns();
		char *text = read_maps(pids[i], &len);
		uint64_t h = gb_fnv1a(text ? text : "", len, GB_FNV1A_INIT);
		pthread_mutex_lock(&k->lock);
		struct kept *e = find(k, pids[i]);
		if (e && !len) {
			e->gone = true;
		} else if (e && (!e->text || h != e->hash)) {
			free(e->text);
			e->text = text;
			e->len = len;
			e->hash = h;
			e->gen = ++k->gen;
			e->read_ns = at;
			text = NULL;
		}
		pthread_mutex_unlock(&k->lock);
		free(text);
	}
	free(pids);
}

static void *keeper(void *arg)
{
	struct gb_mapskeep *k = arg;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		uint64_t ns = (uint64_t)until.tv_nsec + k->every_ns;
		until.tv_sec += (time_t)(ns / 1000000000ull);
		until.tv_nsec = (long)(ns % 1000000000ull);
		while (!k->stop && pthread_cond_timedwait(&k->wake, &k->lock, &until) != ETIMEDOUT)
			;
		if (k->stop)
			break;
		pthread_mutex_unlock(&k->lock);
		gb_mapskeep_round(k);
		pthread_mutex_lock(&k->lock);
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

struct gb_mapskeep *gb_mapskeep_new(uint64_t every_ns, uint64_t active_ns)
{
	struct gb_mapskeep *k = calloc(1, sizeof(*k));
	pthread_condattr_t ca;
	int e;

	if (!k)
		return NULL;
	k->every_ns = every_ns;
	k->active_ns = active_ns;
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->wake, &ca);
	pthread_condattr_destroy(&ca);
	/* (every signal blocked in the thread: gebpf's are for its main
	 * thread, whose poll they must interrupt) */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&k->thread, NULL, keeper, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		pthread_cond_destroy(&k->wake);
		pthread_mutex_destroy(&k->lock);
		free(k);
		errno = e;
		return NULL;
	}
	return k;
}

void gb_mapskeep_free(struct gb_mapskeep *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_cond_signal(&k->wake);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].text);
	free(k->v);
	pthread_cond_destroy(&k->wake);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

void gb_mapskeep_watch(struct gb_mapskeep *k, pid_t pid, bool prepared, uint64_t sample_ns)
{
	pthread_mutex_lock(&k->lock);
	struct kept *e = find(k, pid);
	if (!e && k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 16;
		struct kept *v = realloc(k->v, cap * sizeof(*v));
		if (v) {
			k->v = v;
			k->cap = cap;
		}
	}
	if (!e && k->n < k->cap) {
		e = &k->v[k->n++];
		memset(e, 0, sizeof(*e));
		e->pid = pid;
	}
	if (e) {
		e->prepared |= prepared;
		if (sample_ns > e->sample_ns)
			e->sample_ns = sample_ns;
	}
	pthread_mutex_unlock(&k->lock);
}

void gb_mapskeep_forget(struct gb_mapskeep *k, pid_t pid)
{
	pthread_mutex_lock(&k->lock);
	struct kept *e = find(k, pid);
	if (e) {
		free(e->text);
		*e = k->v[--k->n];
	}
	pthread_mutex_unlock(&k->lock);
}

bool gb_mapskeep_newer(struct gb_mapskeep *k, pid_t pid, uint64_t after_ns, uint64_t *gen,
		       char **text, size_t *len)
{
	bool got = false;

	pthread_mutex_lock(&k->lock);
	struct kept *e = find(k, pid);
	if (e && e->text && e->gen > *gen) {
		if (e->read_ns >= after_ns && (*text = malloc(e->len))) {
			memcpy(*text, e->text, e->len);
			*len = e->len;
			got = true;
		}
		*gen = e->gen;
	}
	pthread_mutex_unlock(&k->lock);
	return got;
}
