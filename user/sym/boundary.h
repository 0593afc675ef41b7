/* Does an instruction start at a run-time address?  Decided from the sized
 * function symbol that holds it, decoded linearly from the function's first
 * byte (decode/flow.h): what a user's hex address must satisfy before gebpf
 * starts a range there (trace --range START-END) or plants a breakpoint
 * there (snap --at ADDR), since a breakpoint or a range start inside an
 * instruction corrupts it or is never reached. */
#ifndef GB_SYM_BOUNDARY_H
#define GB_SYM_BOUNDARY_H

#include <stdint.h>
#include <sys/types.h>

enum gb_boundary_kind {
	GB_BOUNDARY_YES,        /* an instruction starts at addr */
	GB_BOUNDARY_INSIDE,     /* addr is inside the instruction at prev */
	GB_BOUNDARY_UNKNOWN,    /* not decided: why says so */
};

struct gb_boundary {
	enum gb_boundary_kind kind;
	char func[256];          /* the function symbol holding addr ("" if none) */
	uint64_t fn;             /* its run-time start */
	uint64_t prev, next;     /* INSIDE: that instruction's start and its end */
	const char *why;         /* UNKNOWN: "is in no sized function symbol", ... */
};

/* Fills *out for addr in process pid; 0, or -ENOMEM. */
int gb_boundary_check(pid_t pid, uint64_t addr, struct gb_boundary *out);

#endif
