/* Argument parsing shared by the commands whose only option is one flag
 * (gebpf show --json, gebpf read --raw). */
#ifndef GB_CLI_ARGS_H
#define GB_CLI_ARGS_H

#include <stdbool.h>
#include <stdio.h>

/* Parse "[--FLAG] [--help] OPERAND..." for command cmd: sets *set when
 * --FLAG is given and leaves optind at the first operand.  Returns -1 to go
 * on, or the exit code to return (after --help, or a bad option). */
int cli_one_flag(int argc, char **argv, const char *cmd, const char *flag, bool *set,
		 void (*usage)(FILE *f));

#endif
