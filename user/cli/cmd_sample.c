/* Placeholder until the sample command lands (owned by its room's developer). */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_sample(int argc, char **argv)
{
	gb_err("sample: not built yet");
	return GB_EXIT_FAIL;
}
