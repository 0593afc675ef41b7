/* Argument parsing shared by the commands: the one message for a bad option,
 * and the parser of the commands whose only option is one flag (gebpf show
 * --json, gebpf read --raw). */
#ifndef GB_CLI_ARGS_H
#define GB_CLI_ARGS_H

#include <stdbool.h>
#include <stdio.h>

/* Parse "[--FLAG] [--help] OPERAND..." for command cmd: sets *set when
 * --FLAG is given and leaves optind at the first operand.  Returns -1 to go
 * on, or the exit code to return (after --help, or a bad option). */
int cli_one_flag(int argc, char **argv, const char *cmd, const char *flag, bool *set,
		 void (*usage)(FILE *f));

/* After getopt_long(argc, argv, shortopts, ...) with opterr = 0 returned
 * '?' (or an unexpected value): print one line,
 * "gebpf: CMD: unknown option '--x' (see gebpf CMD --help)" (or "option
 * '--x' needs an argument"), and return GB_EXIT_USAGE. */
int cli_bad_option(const char *cmd, char **argv, const char *shortopts);

#endif
