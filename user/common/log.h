/* Logging and error helpers shared by every room.
 *
 * Errors are one line on stderr, "gebpf: <what>: <why>" (docs/trace.md "Errors").  Exit
 * codes: GB_EXIT_OK 0, GB_EXIT_FAIL 1 (runtime failure), GB_EXIT_USAGE 2.
 */
#ifndef GB_COMMON_LOG_H
#define GB_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum { GB_EXIT_OK = 0, GB_EXIT_FAIL = 1, GB_EXIT_USAGE = 2 };

/* "gebpf: <fmt>\n" on stderr, and always one line: control characters in the
 * formatted text (a newline in an option's value) are written escaped
 * ("\n", "\t", "\x1b"), as by every function here. */
void gb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* gb_err(fmt, ...), then return e: "return gb_fail(-ENOENT, ...)" in code
 * that returns -errno. */
int gb_fail(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "gebpf: warning: <fmt>\n" on stderr. */
void gb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "gebpf: <fmt>\n" on stderr, only when verbose logging is on. */
void gb_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void gb_log_set_verbose(bool on);
/* --debug: verbose, and libbpf's own debug lines too (gb_libbpf_print). */
void gb_log_set_debug(bool on);
/* While on, gb_warn's lines are gb_info's (only with verbose logging, no
 * "warning: "): around a step that may fail for a reason the user did not
 * ask about and whose caller then goes on quietly (the default trap's first
 * choice, the patch trap, being refused). */
void gb_log_demote_warnings(bool on);

/* The libbpf print callback: libbpf's warnings with verbose logging (-v),
 * everything it says (its debug lines too) with --debug, nothing otherwise
 * (a failure is said in gebpf's own line). */
int gb_libbpf_print(int level, const char *fmt, va_list ap);

#endif
