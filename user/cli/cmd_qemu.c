/* gebpf qemu: argv -> a qemu-x86_64 command line with gebpf's plugin
 * (user/qemu/, docs/qemu.md), then exec. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/log.h"

#define PLUGIN_NAME "gebpf-qemu.so"
/* --values: the plugin built for QEMU 9.2's API and the QEMU scripts/qemu10
 * builds, both beside gebpf (docs/qemu.md "QEMU 10") */
#define PLUGIN10_NAME "gebpf-qemu10.so"
#define QEMU10_PATH "qemu10/bin/qemu-x86_64"
#define VALUES_TOO_OLD "qemu: --values needs QEMU 9.2 or later (its plugin API gives register " \
	"and memory values); "

static void usage(FILE *f)
{
	fprintf(f,
"usage: gebpf qemu [options] -- PROG [ARG...]\n"
"\n"
"Run PROG under QEMU user mode (qemu-x86_64) with gebpf's TCG plugin, which\n"
"writes the trace lines of `gebpf trace` (docs/trace-format.md) for every vCPU\n"
"(docs/qemu.md).  The plugin is " PLUGIN_NAME " beside the gebpf binary.  Compare\n"
"with a native trace: gebpf diff --normalise qemu native.jsonl qemu.jsonl\n"
"\n"
"  -r, --range R          START-END (hex, inclusive), SYMBOL or PROG:SYMBOL of\n"
"                         the guest binary (a PIE at QEMU's load address)\n"
"      --start ADDR       lower bound (hex); --end ADDR: upper bound (inclusive)\n"
"      --exec on|off      exec lines (default on); memory lines are always written\n"
"      --max-events N     lines written at most (default 1000000, 0 = unlimited);\n"
"                         further lines are counted as dropped\n"
"      --values           each access line gains its value, each exec line the\n"
"                         registers it wrote, regs lines the register file\n"
"                         (as gebpf trace --values): needs QEMU 9.2 or later,\n"
"                         the one scripts/qemu10 builds beside gebpf (qemu10/),\n"
"                         run with " PLUGIN10_NAME "\n"
"  -o, --output FILE      write the trace to FILE (default: stdout); FILE.zst:\n"
"                         zstd\n"
"      --qemu PATH        the QEMU to run (default: qemu-x86_64 from PATH; with\n"
"                         --values, qemu10/bin/qemu-x86_64 beside gebpf)\n"
"      --keep-env-order   hand QEMU the environment as it is (default: reversed,\n"
"                         as QEMU 7.2 reverses it again for the guest, so the\n"
"                         guest sees the order a native run sees; docs/qemu.md;\n"
"                         with --values as it is: QEMU 10 keeps the order)\n"
"  -h, --help             this text\n"
"\n"
"The exit status is QEMU's (the guest's, or 1 when the plugin refuses its\n"
"arguments, with one line).  The same plugin arguments by hand:\n"
"  qemu-x86_64 -plugin .output/" PLUGIN_NAME ",range=R,exec=on,max_events=N,out=FILE PROG\n");
}

enum { O_START = 256, O_END, O_EXEC, O_MAX_EVENTS, O_QEMU, O_KEEP_ENV, O_VALUES };

static const struct option longopts[] = {
	{ "range", required_argument, NULL, 'r' },
	{ "start", required_argument, NULL, O_START },
	{ "end", required_argument, NULL, O_END },
	{ "exec", required_argument, NULL, O_EXEC },
	{ "max-events", required_argument, NULL, O_MAX_EVENTS },
	{ "output", required_argument, NULL, 'o' },
	{ "qemu", required_argument, NULL, O_QEMU },
	{ "keep-env-order", no_argument, NULL, O_KEEP_ENV },
	{ "values", no_argument, NULL, O_VALUES },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* ",NAME=VALUE" onto the -plugin argument; QEMU's option syntax takes a
 * comma inside a value doubled. */
static int add(char *buf, size_t len, const char *name, const char *value)
{
	size_t n = strlen(buf);
	int w = snprintf(buf + n, len - n, ",%s=", name);
	if (w < 0 || (size_t)w >= len - n)
		return -1;
	n += (size_t)w;
	for (const char *c = value; *c; c++) {
		if (n + 3 >= len)
			return -1;
		buf[n++] = *c;
		if (*c == ',')
			buf[n++] = ',';
	}
	buf[n] = 0;
	return 0;
}

/* name in the directory of this gebpf binary. */
static int beside(char *buf, size_t len, const char *name)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	if ((size_t)snprintf(buf, len, "%s/%s", exe, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* `QEMU --version`'s "version X.Y": X * 100 + Y, 0 when it runs but says
 * none, -1 when it does not run. */
static int qemu_version(const char *qemu)
{
	int fd[2];
	if (pipe(fd))
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 2);
		execlp(qemu, qemu, "--version", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char out[512];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(out) - 1 && ((r = read(fd[0], out + n, sizeof(out) - 1 - n)) > 0 ||
				       (r < 0 && errno == EINTR)))
		n += r > 0 ? (size_t)r : 0;
	out[n] = 0;
	close(fd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	unsigned major, minor;
	const char *v = strstr(out, "version ");
	if (!v || sscanf(v + 8, "%u.%u", &major, &minor) != 2)
		return 0;
	return (int)(major * 100 + minor);
}

/* --values: the QEMU (qemu10/ beside gebpf unless --qemu) and its plugin
 * (PLUGIN10_NAME), or one line and GB_EXIT_FAIL. */
static int values_setup(const char **qemu, bool qemu_given, char *plugin, size_t len)
{
	static char q10[PATH_MAX];
	int err;
	if (!qemu_given && !(err = beside(q10, sizeof(q10), QEMU10_PATH)) && !access(q10, X_OK))
		*qemu = q10;
	int v = qemu_version(*qemu);
	if (v < 0 && !qemu_given) {
		gb_err(VALUES_TOO_OLD "no %s runs here: run scripts/qemu10 (docs/qemu.md)", *qemu);
		return GB_EXIT_FAIL;
	}
	if (v < 0) {
		gb_err("qemu: %s: does not run (--version)", *qemu);
		return GB_EXIT_FAIL;
	}
	if (v < 902) {
		if (v)
			gb_err(VALUES_TOO_OLD "this is QEMU %d.%d%s (docs/qemu.md)", v / 100, v % 100,
			       qemu_given ? "" : ": run scripts/qemu10");
		else
			gb_err(VALUES_TOO_OLD "%s does not say its version (docs/qemu.md)", *qemu);
		return GB_EXIT_FAIL;
	}
	if ((err = beside(plugin, len, PLUGIN10_NAME))) {
		gb_err("qemu: /proc/self/exe: %s", strerror(-err));
		return GB_EXIT_FAIL;
	}
	if (access(plugin, R_OK)) {
		gb_err("qemu: %s: %s (make qemu10 builds it beside gebpf; docs/qemu.md)", plugin,
		       strerror(errno));
		return GB_EXIT_FAIL;
	}
	return GB_EXIT_OK;
}

/* environ in reverse order.  QEMU 7.2's linux-user copies the host
 * environment into a list by inserting each variable at its head
 * (util/envlist.c) and gives the guest that list from its head, so the
 * guest's envp is the host's reversed: glibc's tunables, getenv's first
 * match and a program iterating its environment then run differently from
 * a native run (docs/qemu.md).  Reversing it here undoes that.  NULL when
 * out of memory. */
static char **reversed_environ(void)
{
	extern char **environ;
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		env[i] = environ[n - 1 - i];
	return env;
}

int cmd_qemu(int argc, char **argv)
{
	bool keep_env = false, values = false, qemu_given = false;
	const char *qemu = "qemu-x86_64";
	char plugin[PATH_MAX], arg[2 * PATH_MAX + 512];
	const char *knob[][2] = { { "range", NULL }, { "start", NULL }, { "end", NULL },
				  { "exec", NULL }, { "max_events", NULL }, { "out", NULL } };
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+r:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': knob[0][1] = optarg; break;
		case O_START: knob[1][1] = optarg; break;
		case O_END: knob[2][1] = optarg; break;
		case O_EXEC: knob[3][1] = optarg; break;
		case O_MAX_EVENTS: knob[4][1] = optarg; break;
		case 'o': knob[5][1] = optarg; break;
		case O_QEMU: qemu = optarg; qemu_given = true; break;
		case O_KEEP_ENV: keep_env = true; break;
		case O_VALUES: values = true; break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: return cli_bad_option("qemu", argv, "+r:o:h");
		}
	}
	if (optind >= argc) {
		gb_err("qemu: no program: give -- PROG [ARG...] (see gebpf qemu --help)");
		return GB_EXIT_USAGE;
	}
	int err = 0;
	if (values) {
		if ((err = values_setup(&qemu, qemu_given, plugin, sizeof(plugin))))
			return err;
		keep_env = true; /* (QEMU 10 does not reverse it: docs/qemu.md) */
	} else if ((err = beside(plugin, sizeof(plugin), PLUGIN_NAME))) {
		gb_err("qemu: /proc/self/exe: %s", strerror(-err));
		return GB_EXIT_FAIL;
	} else if (access(plugin, R_OK)) {
		gb_err("qemu: %s: %s (make builds it beside gebpf; docs/qemu.md)", plugin,
		       strerror(errno));
		return GB_EXIT_FAIL;
	}
	arg[0] = 0;
	if (add(arg, sizeof(arg), "file", plugin))
		goto too_long;
	memmove(arg, arg + strlen(",file="), strlen(arg + strlen(",file=")) + 1);
	for (size_t i = 0; i < sizeof(knob) / sizeof(knob[0]); i++)
		if (knob[i][1] && add(arg, sizeof(arg), knob[i][0], knob[i][1]))
			goto too_long;
	if (values && add(arg, sizeof(arg), "values", "on"))
		goto too_long;

	int n = argc - optind;
	char **qargv = calloc((size_t)n + 4, sizeof(*qargv));
	extern char **environ;
	char **env = keep_env ? environ : reversed_environ();
	if (!qargv || !env) {
		gb_err("qemu: %s", strerror(ENOMEM));
		return GB_EXIT_FAIL;
	}
	qargv[0] = (char *)qemu;
	qargv[1] = "-plugin";
	qargv[2] = arg;
	memcpy(qargv + 3, argv + optind, (size_t)n * sizeof(*qargv));
	fflush(stdout);
	/* QEMU 10 maps the guest's stack where the host's mmap puts it: with
	 * the host's ASLR off, as gebpf trace runs a program, the guest's
	 * addresses are the same from run to run (QEMU 7.2's already are) */
	if (values)
		personality((unsigned long)personality(0xffffffff) | ADDR_NO_RANDOMIZE);
	execvpe(qemu, qargv, env);
	gb_err("qemu: %s: %s (Debian: apt-get install qemu-user)", qemu, strerror(errno));
	free(qargv);
	if (!keep_env)
		free(env);
	return GB_EXIT_FAIL;
too_long:
	gb_err("qemu: the plugin's arguments are too long");
	return GB_EXIT_USAGE;
}
