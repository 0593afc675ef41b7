/* Placeholder until the show command lands (owned by its room's developer). */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_show(int argc, char **argv)
{
	gb_err("show: not built yet");
	return GB_EXIT_FAIL;
}
