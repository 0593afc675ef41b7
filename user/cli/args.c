#include "cli/args.h"

#include <getopt.h>
#include <string.h>

#include "common/log.h"

int cli_bad_option(const char *cmd, char **argv, const char *shortopts)
{
	/* optopt: 0 for an unknown long option; the option's value when its
	 * argument is missing; the character for a short option. */
	const char *word = argv[optind - 1];
	char shortopt[3] = { '-', (char)optopt, 0 };
	bool is_short = optopt > 0 && optopt < 128 && strncmp(word, "--", 2);
	bool missing = optopt && (!is_short || strchr(shortopts, optopt));
	if (is_short)
		word = shortopt;
	if (missing)
		gb_err("%s: option '%s' needs an argument (see gebpf %s --help)", cmd, word, cmd);
	else
		gb_err("%s: unknown option '%s' (see gebpf %s --help)", cmd, word, cmd);
	return GB_EXIT_USAGE;
}

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
			return cli_bad_option(cmd, argv, "h");
		}
	}
	return -1;
}
