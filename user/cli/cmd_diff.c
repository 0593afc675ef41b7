/* Placeholder until the diff command lands (owned by its room's developer). */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_diff(int argc, char **argv)
{
	gb_err("diff: not built yet");
	return GB_EXIT_FAIL;
}
