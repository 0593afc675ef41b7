/* One function per command (bpftool main.c / perf builtin-*.c habit).
 * Each parses its own argv into an opts struct and calls into the rooms.
 * Returns an exit code (GB_EXIT_*). argv[0] is the command name. */
#ifndef GB_CLI_CMDS_H
#define GB_CLI_CMDS_H

int cmd_trace(int argc, char **argv);
int cmd_snap(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_qemu(int argc, char **argv);

#endif
