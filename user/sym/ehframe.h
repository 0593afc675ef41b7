/* The exception-handling tables of an ELF file (.eh_frame and the LSDAs of
 * .gcc_except_table), read from the file alone: where each FDE's code
 * starts, and every C++ landing pad (LPStart + the call-site record's
 * landing-pad offset).  Formats: the LSB's "Exception Frames" and the
 * Itanium C++ ABI LSDA as GCC emits it (DW_EH_PE_* pointer encodings).
 * Every read is bounds-checked; a malformed entry is skipped with a
 * warning, never read past. */
#ifndef GB_SYM_EHFRAME_H
#define GB_SYM_EHFRAME_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

struct gb_ehinfo {
	uint64_t *fde_starts;   /* link-time vaddrs, unsorted */
	size_t nfde, fde_cap;
	uint64_t *pads;         /* landing pads, unsorted, may repeat */
	size_t npads, pads_cap;
	size_t nbad;            /* malformed CIEs/FDEs/LSDAs skipped */
	char first_bad[160];    /* what the first one was */
};

/* 0 (also when the file has no .eh_frame), or -ENOMEM. */
int gb_eh_read(Elf *e, struct gb_ehinfo *out);
void gb_eh_free(struct gb_ehinfo *eh);

#endif
