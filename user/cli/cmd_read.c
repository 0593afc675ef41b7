/* Placeholder until the read command lands (owned by its room's developer). */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_read(int argc, char **argv)
{
	gb_err("read: not built yet");
	return GB_EXIT_FAIL;
}
