/* Placeholder until the trace command lands. */
#include "cli/cmds.h"
#include "common/log.h"

int cmd_trace(int argc, char **argv)
{
	gb_err("trace: not built yet");
	return GB_EXIT_FAIL;
}
