/* The trace's exec and access lines (docs/trace-format.md), made from texts
 * kept per pc and per vcpu with vt a decimal counter: gebpf's writer
 * (record/jsonl.c) and the QEMU plugin (qemu/sink.c) both make their lines
 * here, so the two are byte for byte one shape.  Header-only and libc-only,
 * as numfmt.h (the plugin compiles it on its own).
 *
 * A range's few hundred instructions run millions of times: an exec line is
 * its pc's text (made once per pc and vcpu) and vt's digits; an access line
 * is its vcpu's head (once per vcpu), the address, the size, the pc's part
 * (once per pc) and the digits.  The texts are copied whole (16 to 64
 * bytes), so a line needs GB_LINEFMT_ROOM bytes of room at p, whatever its
 * length. */
#ifndef GB_RECORD_LINEFMT_H
#define GB_RECORD_LINEFMT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record/numfmt.h"

#define GB_LINEFMT_ROOM 160
#define GB_LINEFMT_PCS_BITS 12 /* a direct-mapped cache of 4,096 pcs' texts */

struct gb_linefmt_pc {
	uint64_t pc;
	uint32_t n;          /* the length of s; 0: the slot is empty */
	uint32_t exec_vcpu;  /* exec's vcpu + 1 (0: exec not made) */
	uint32_t exec_n;
	char s[36];          /* ,"pc":"0x...","vt":   (7 + 18 + 7 bytes at most) */
	char exec[64];       /* {"t":"exec","vcpu":V,"pc":"0x...","vt":   (19 + 10 + 32) */
};

struct gb_linefmt {
	struct gb_linefmt_pc *pcs;   /* 1 << GB_LINEFMT_PCS_BITS (NULL: own only) */
	struct gb_linefmt_pc own;    /* (no memory for pcs: each pc made here) */
	struct gb_linefmt_pc *last;  /* the last pc's, or NULL */
	struct gb_numfmt_ctr vt;
	uint32_t head_vcpu;          /* the heads' vcpu + 1 (0: none yet) */
	uint32_t head_n[2];
	char head[2][48];            /* [write]: {"t":"read","vcpu":V,"addr":"  */
};

/* 0, or -1 without memory for the cache (the lines are the same, made at
 * each new pc). */
static inline int gb_linefmt_init(struct gb_linefmt *f)
{
	memset(f, 0, sizeof(*f));
	f->pcs = (struct gb_linefmt_pc *)calloc(1u << GB_LINEFMT_PCS_BITS, sizeof(*f->pcs));
	return f->pcs ? 0 : -1;
}

static inline void gb_linefmt_free(struct gb_linefmt *f)
{
	free(f->pcs);
	f->pcs = NULL;
	f->last = NULL;
}

static inline struct gb_linefmt_pc *gb_linefmt__pc(struct gb_linefmt *f, uint64_t pc)
{
	struct gb_linefmt_pc *x = f->last;
	if (x && x->pc == pc)
		return x;
	x = f->pcs ? &f->pcs[(pc ^ pc >> GB_LINEFMT_PCS_BITS) & ((1u << GB_LINEFMT_PCS_BITS) - 1)]
		   : &f->own;
	if (!x->n || x->pc != pc) {
		char *p = x->s;
		memcpy(p, ",\"pc\":\"", 7);
		p += 7;
		p += gb_numfmt_hex(p, pc);
		memcpy(p, "\",\"vt\":", 7);
		x->n = (uint32_t)(p + 7 - x->s);
		x->pc = pc;
		x->exec_vcpu = 0;
	}
	f->last = x;
	return x;
}

/* vt's digits and the line's end. */
static inline char *gb_linefmt__end(struct gb_linefmt *f, char *p, uint64_t vt)
{
	p += gb_numfmt_ctr_put(&f->vt, p, vt);
	memcpy(p, "}\n", 2);
	return p + 2;
}

/* {"t":"exec","vcpu":V,"pc":"0x..","vt":N} and its newline at p; the end. */
static inline char *gb_linefmt_exec(struct gb_linefmt *f, char *p, uint32_t vcpu, uint64_t pc,
				    uint64_t vt)
{
	struct gb_linefmt_pc *x = gb_linefmt__pc(f, pc);
	if (x->exec_vcpu != vcpu + 1) {
		char *q = x->exec;
		memcpy(q, "{\"t\":\"exec\",\"vcpu\":", 19);
		q += 19;
		q += gb_numfmt_dec(q, vcpu);
		memcpy(q, x->s, x->n);
		x->exec_n = (uint32_t)(q - x->exec) + x->n;
		x->exec_vcpu = vcpu + 1;
	}
	memcpy(p, x->exec, 64);
	return gb_linefmt__end(f, p + x->exec_n, vt);
}

/* {"t":"read"|"write","vcpu":V,"addr":"0x..","size":S,"pc":"0x..","vt":N}
 * and its newline at p; the end. */
static inline char *gb_linefmt_acc(struct gb_linefmt *f, char *p, uint32_t vcpu, bool write,
				   uint64_t addr, uint32_t size, uint64_t pc, uint64_t vt)
{
	if (f->head_vcpu != vcpu + 1) {
		for (int w = 0; w < 2; w++) {
			char *q = f->head[w];
			if (w)
				memcpy(q, "{\"t\":\"write\",\"vcpu\":", 20), q += 20;
			else
				memcpy(q, "{\"t\":\"read\",\"vcpu\":", 19), q += 19;
			q += gb_numfmt_dec(q, vcpu);
			memcpy(q, ",\"addr\":\"", 9);
			f->head_n[w] = (uint32_t)(q + 9 - f->head[w]);
		}
		f->head_vcpu = vcpu + 1;
	}
	memcpy(p, f->head[write], 48);
	p += f->head_n[write];
	p += gb_numfmt_hex(p, addr);
	memcpy(p, "\",\"size\":", 9);
	p += 9;
	if (size < 10)
		*p++ = (char)('0' + size);
	else
		p += gb_numfmt_dec(p, size);
	struct gb_linefmt_pc *x = gb_linefmt__pc(f, pc);
	memcpy(p, x->s, 32);
	return gb_linefmt__end(f, p + x->n, vt);
}

/* trace --values' lines (docs/trace-format.md "Values"), as long as their
 * values: not from the texts above (room: GB_LINEFMT_ROOM plus the lengths
 * of the texts given).  Each returns the end of what it wrote. */

static inline char *gb_linefmt__put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define GB_LINEFMT_LIT(p, lit) gb_linefmt__put((p), (lit), sizeof(lit) - 1)

/* {"t":"exec","vcpu":V,"pc":"0x..","regs":REGS,"vt":N} and its newline. */
static inline char *gb_linefmt_exec_regs(char *p, uint32_t vcpu, uint64_t pc, const char *regs,
					 size_t rl, uint64_t vt)
{
	p = GB_LINEFMT_LIT(p, "{\"t\":\"exec\",\"vcpu\":");
	p += gb_numfmt_dec(p, vcpu);
	p = GB_LINEFMT_LIT(p, ",\"pc\":\"");
	p += gb_numfmt_hex(p, pc);
	p = GB_LINEFMT_LIT(p, "\",\"regs\":");
	p = gb_linefmt__put(p, regs, rl);
	p = GB_LINEFMT_LIT(p, ",\"vt\":");
	p += gb_numfmt_dec(p, vt);
	return GB_LINEFMT_LIT(p, "}\n");
}

/* {"t":"regs","vcpu":V,"regs":REGS,"vt":N} and its newline. */
static inline char *gb_linefmt_regs(char *p, uint32_t vcpu, const char *regs, size_t rl,
				    uint64_t vt)
{
	p = GB_LINEFMT_LIT(p, "{\"t\":\"regs\",\"vcpu\":");
	p += gb_numfmt_dec(p, vcpu);
	p = GB_LINEFMT_LIT(p, ",\"regs\":");
	p = gb_linefmt__put(p, regs, rl);
	p = GB_LINEFMT_LIT(p, ",\"vt\":");
	p += gb_numfmt_dec(p, vt);
	return GB_LINEFMT_LIT(p, "}\n");
}

/* An access line with "val":"VAL" after its size (val NULL: none). */
static inline char *gb_linefmt_acc_val(char *p, uint32_t vcpu, bool write, uint64_t addr,
				       uint32_t size, const char *val, size_t vl, uint64_t pc,
				       uint64_t vt)
{
	p = write ? GB_LINEFMT_LIT(p, "{\"t\":\"write\",\"vcpu\":")
		  : GB_LINEFMT_LIT(p, "{\"t\":\"read\",\"vcpu\":");
	p += gb_numfmt_dec(p, vcpu);
	p = GB_LINEFMT_LIT(p, ",\"addr\":\"");
	p += gb_numfmt_hex(p, addr);
	p = GB_LINEFMT_LIT(p, "\",\"size\":");
	p += gb_numfmt_dec(p, size);
	if (val) {
		p = GB_LINEFMT_LIT(p, ",\"val\":\"");
		p = gb_linefmt__put(p, val, vl);
		*p++ = '"';
	}
	p = GB_LINEFMT_LIT(p, ",\"pc\":\"");
	p += gb_numfmt_hex(p, pc);
	p = GB_LINEFMT_LIT(p, "\",\"vt\":");
	p += gb_numfmt_dec(p, vt);
	return GB_LINEFMT_LIT(p, "}\n");
}

/* One member of a regs object, "NAME":"0x..." (n bytes at b, one
 * little-endian integer), after a comma unless first; at most
 * strlen(name) + 2n + 8 bytes. */
static inline char *gb_linefmt_reg(char *p, bool first, const char *name, const uint8_t *b, size_t n)
{
	if (!first)
		*p++ = ',';
	*p++ = '"';
	p = gb_linefmt__put(p, name, strlen(name));
	p = GB_LINEFMT_LIT(p, "\":\"");
	p += gb_numfmt_hexle(p, b, n);
	*p++ = '"';
	return p;
}

#endif
