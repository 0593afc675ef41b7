#include "cli/args.h"

#include <getopt.h>

#include "common/log.h"

int cli_one_flag(int argc, char **argv, const char *cmd, const char *flag, bool *set,
		 void (*usage)(FILE *f))
{
	const struct option lo[] = { { flag, no_argument, NULL, 'f' },
				     { "help", no_argument, NULL, 'h' }, { 0 } };
	int c;
	*set = false;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'f') {
			*set = true;
		} else if (c == 'h') {
			usage(stdout);
			return GB_EXIT_OK;
		} else {
			gb_err("%s: unknown option '%s' (see gebpf %s --help)", cmd, argv[optind - 1], cmd);
			return GB_EXIT_USAGE;
		}
	}
	return -1;
}
