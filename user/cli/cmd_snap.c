/* Placeholder until the snap command lands (owned by its room's developer). */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_snap(int argc, char **argv)
{
	gb_err("snap: not built yet");
	return GB_EXIT_FAIL;
}
