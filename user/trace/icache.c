#include "trace/icache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/mem.h"

#define NBUCKETS (1u << 14)
#define NPAGES   (1u << 12)    /* code-page filter: direct-mapped page numbers */

struct entry {
	struct entry *next;
	uint64_t epoch;
	struct gb_insn insn;
};

struct gb_icache {
	struct entry *buckets[NBUCKETS];
	uint64_t pages[NPAGES];    /* page number + 1 of pages holding cached code */
	uint64_t epoch;
	struct gb_icache_stats st;
	gb_icache_patch_fn patch;
	void *patch_ctx;
};

void gb_icache__set_patch(struct gb_icache *c, gb_icache_patch_fn fn, void *ctx)
{
	c->patch = fn;
	c->patch_ctx = ctx;
	gb_icache__clear(c);
}

void gb_icache__patch(const struct gb_icache *c, uint64_t addr, uint8_t *buf, size_t len)
{
	if (c->patch)
		c->patch(c->patch_ctx, addr, buf, len);
}

static inline uint32_t hash_pc(uint64_t pc)
{
	return (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> 50) & (NBUCKETS - 1);
}

struct gb_icache *gb_icache__new(void)
{
	struct gb_icache *c = calloc(1, sizeof(*c));
	if (c)
		c->epoch = 1;
	return c;
}

void gb_icache__clear(struct gb_icache *c)
{
	for (uint32_t i = 0; i < NBUCKETS; i++) {
		struct entry *e = c->buckets[i];
		while (e) {
			struct entry *n = e->next;
			free(e);
			e = n;
		}
		c->buckets[i] = NULL;
	}
	memset(c->pages, 0, sizeof(c->pages));
	c->epoch++;
}

void gb_icache__free(struct gb_icache *c)
{
	if (!c)
		return;
	gb_icache__clear(c);
	free(c);
}

void gb_icache__bump(struct gb_icache *c) { c->epoch++; }
uint64_t gb_icache__epoch(const struct gb_icache *c) { return c->epoch; }

static inline void mark_page(struct gb_icache *c, uint64_t page)
{
	c->pages[page & (NPAGES - 1)] = page + 1;
}

static inline bool is_code_page(const struct gb_icache *c, uint64_t page)
{
	return c->pages[page & (NPAGES - 1)] == page + 1;
}

void gb_icache__note_write(struct gb_icache *c, uint64_t addr, uint64_t len)
{
	if (!len)
		return;
	for (uint64_t p = addr >> 12; p <= (addr + len - 1) >> 12; p++)
		if (is_code_page(c, p)) {
			c->epoch++;
			return;
		}
}

/* Read up to 15 code bytes at pc (fewer at the end of a readable region). */
static ssize_t read_code(const struct gb_icache *c, pid_t pid, uint64_t pc, uint8_t *buf)
{
	ssize_t n = gb_mem_read(pid, pc, buf, GB_INSN_MAX_LEN);
	if (n > 0)
		gb_icache__patch(c, pc, buf, (size_t)n);
	return n;
}

const struct gb_insn *gb_icache__get(struct gb_icache *c, pid_t pid, uint64_t pc, int *err)
{
	uint32_t h = hash_pc(pc);
	struct entry *e;
	for (e = c->buckets[h]; e; e = e->next)
		if (e->insn.pc == pc)
			break;
	if (e && e->epoch == c->epoch) {
		c->st.hits++;
		return &e->insn;
	}
	uint8_t bytes[GB_INSN_MAX_LEN];
	ssize_t n = read_code(c, pid, pc, bytes);
	if (n <= 0) {
		*err = n < 0 ? (int)n : -EFAULT;
		return NULL;
	}
	if (e) {
		c->st.validations++;
		if ((size_t)n >= e->insn.len && !memcmp(bytes, e->insn.bytes, e->insn.len)) {
			e->epoch = c->epoch;
			return &e->insn;
		}
	} else {
		e = malloc(sizeof(*e));
		if (!e) {
			*err = -ENOMEM;
			return NULL;
		}
		e->next = c->buckets[h];
		c->buckets[h] = e;
	}
	c->st.decodes++;
	int r = gb_decode(pc, bytes, (size_t)n, &e->insn);
	if (r) {
		e->insn.pc = pc;
		e->insn.len = 0;
		e->epoch = 0; /* never trusted: re-read next time */
		*err = r;
		return NULL;
	}
	e->epoch = c->epoch;
	mark_page(c, pc >> 12);
	mark_page(c, (pc + e->insn.len - 1) >> 12);
	return &e->insn;
}

void gb_icache__stats(const struct gb_icache *c, struct gb_icache_stats *s) { *s = c->st; }
