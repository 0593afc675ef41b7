/* gebpf diff's report, inside: the report's state, shared by report.c
 * (divergences of shape, the summary) and vreport.c (divergences of value);
 * for those two files only. */
#ifndef GB_TDIFF_REPORT_INT_H
#define GB_TDIFF_REPORT_INT_H

#include <cjson/cJSON.h>

#include "tdiff/report.h"
#include "tdiff/values.h"

#define FIRST_PCS 3
#define NO_PC UINT64_MAX

/* Value divergences per instruction (the summary's table). */
#define VPC_SLOTS 1024
struct vpc {
	uint64_t pc, count;
	char regs[48];   /* what differed the first time */
};

struct gb_treport {
	struct gb_treport_opts o;
	FILE *out;
	unsigned long total, per_kind[GB_D_N], per_quirk[GB_QUIRK_N];
	uint64_t first_pc[GB_D_N][FIRST_PCS];
	/* The last records of A (context), raw lines owned. */
	struct gb_trec *hist;
	size_t hist_n, hist_head;
	cJSON *doc, *divs;
	struct gb_vmemory vmem;
	struct vpc *vpcs;           /* VPC_SLOTS, open addressing by pc */
	size_t nvpcs;
	unsigned long values_compared, values_ignored[GB_VK_N];
};

/* report.c */
void treport_header(struct gb_treport *r);
/* "sym+0xoff", or "0x<pc>" without a symbol, or "(not an instruction)". */
bool treport_describe(const struct gb_treport *r, uint64_t pc, char *buf, size_t len);
const char *treport_kind_name(enum gb_dkind k);
/* vreport.c: the summary's value parts (doc: the JSON document, or NULL
 * for text). */
void treport_value_table(struct gb_treport *r, cJSON *doc);
void treport_ignored_line(struct gb_treport *r, cJSON *doc);

#endif
