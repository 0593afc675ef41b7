/* Names of CPython code objects of live processes (the code pointers of
 * the Python frames bpf/pyframes.bpf.h records): "module.qualname", the
 * file, the first line, and the line of an instruction from the 3.11
 * location table (co_linetable; CPython's Objects/locations.md).
 *
 * Code objects live long, so each is read once, from /proc/PID/mem, and
 * cached by (pid, address).  A lookup for a sample taken after the entry
 * was last checked re-reads the object's header and compares it with the
 * cached one (type, first line, and the pointers to its name, qualified
 * name, file name and line table): a code object freed and another
 * allocated at its address reads differently and is read anew, under a new
 * id.  (A batch of samples read together thus costs one read per code
 * object.)  When the process is gone the cached name is used.
 *
 * The module is made from the file name (pycode_module() in pycode.c):
 * under a ".../site-packages/", ".../dist-packages/" or ".../lib/pythonX.Y/"
 * directory the dotted path below it ("json/decoder.py" -> "json.decoder",
 * "pkg/__init__.py" -> "pkg"), else the file's base name without ".py"
 * (a script: "work.py" -> "work", also when it runs as __main__);
 * "<frozen importlib._bootstrap>" -> "importlib._bootstrap"; another
 * "<...>" name ("<string>") as it is.
 *
 *   struct gb_pycode *c = gb_pycode__new();
 *   f = gb_pycode__name(c, pid, &rt, code, lasti, &line);
 *   gb_pycode__free(c);
 */
#ifndef GB_SAMPLE_PYCODE_H
#define GB_SAMPLE_PYCODE_H

#include <stdint.h>
#include <sys/types.h>

#include "sample/pyruntime.h"

struct gb_pyfunc {
	uint64_t id;               /* unique per code object read (never reused) */
	char *name;                /* "module.qualname" */
	char *file;                /* co_filename */
	int first_line;            /* co_firstlineno */
};

struct gb_pycode;

struct gb_pycode *gb_pycode__new(void);   /* NULL on ENOMEM */
void gb_pycode__free(struct gb_pycode *c);

/* The function of code object `code` of pid (a process of runtime rt) in
 * a sample taken at ns (CLOCK_MONOTONIC), and in *line the line of
 * instruction lasti (-1: the first line).  NULL
 * when code is not a readable code object (then *line is 0). Valid until
 * the next call for the same (pid, code) or free. */
const struct gb_pyfunc *gb_pycode__name(struct gb_pycode *c, pid_t pid,
					 const struct gb_pyruntime *rt, uint64_t code,
					 int32_t lasti, uint64_t ns, int *line);

/* The line of instruction lasti (code units) in a 3.11 location table,
 * starting from first_line. */
int gb_pycode_line(const uint8_t *table, size_t len, int first_line, int32_t lasti);

/* The module name of a code object's file name (the rules above). */
void gb_pycode_module(const char *file, char *buf, size_t len);

#endif
