/* A fault at an entry that keeps a uprobe while the patch trap patches
 * another: tc_shortfault's `traced` (a 2-byte load at `traced`, `ts_in2` 2
 * bytes in the target of a jump from `via_in2` outside, so no 5-byte patch
 * can go at `traced`), but the SIGSEGV handler resumes by RIP += 4 (past the
 * load and the add, at `ts_mid`) instead of loading ts_mid's address, so no
 * code address of the range is in the data and `ts_in2` can be patched.
 * Every third call passes a bad pointer: the probed load faults.  Usage:
 * tc_probedfault [N] (default 20).  Prints a checksum; exit 0.  Range:
 * `traced`. */
#define TC_RESUME_BY_LENGTH
#include "tc_shortfault.c"
