/* The rules of gebpf sample's options: see opts.h. */
#include "sample/opts.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"

/* --every, --pprof-dir, --keep and --max-age go together, alone among the
 * outputs. */
static int continuous(const struct gb_sample_session_opts *o, bool report_or_folded)
{
	struct stat st;

	if (!o->every && !o->pprof_dir && !o->keep && !o->max_age)
		return 0;
	if (!o->every || !o->pprof_dir) {
		gb_err("sample: %s: continuous mode needs both --every T and --pprof-dir DIR",
		       o->every ? "--every" : o->pprof_dir ? "--pprof-dir" :
		       o->keep ? "--keep" : "--max-age");
		return -1;
	}
	if (o->pprof || o->flame || report_or_folded || o->faults) {
		gb_err("sample: --pprof-dir: not with --pprof, --flamegraph, --report, --folded or --faults "
		       "(one profile per period is the output)");
		return -1;
	}
	if (stat(o->pprof_dir, &st)) {
		gb_err("sample: --pprof-dir %s: %s", o->pprof_dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		gb_err("sample: --pprof-dir %s: not a directory", o->pprof_dir);
		return -1;
	}
	return 0;
}

int gb_sample_opts_settle(struct gb_sample_session_opts *o, bool report, bool folded,
			  bool call_graph)
{
	if (!!o->npids + !!o->cmd + o->all + !!o->cgroup != 1) {
		gb_err("sample: give exactly one of -p PID, -a, --cgroup DIR or -- CMD "
		       "(try 'gebpf sample --help')");
		return -1;
	}
	if (report && folded) {
		gb_err("sample: --report and --folded: give one of them");
		return -1;
	}
	if (continuous(o, report || folded))
		return -1;
	o->mode = report ? GB_SAMPLE_REPORT : folded ? GB_SAMPLE_FOLDED :
		  o->pprof || o->flame || o->pprof_dir ? GB_SAMPLE_PPROF_ONLY : GB_SAMPLE_LINES;
	if (o->mode == GB_SAMPLE_LINES && (call_graph || o->kernel || o->stack_size)) {
		gb_err("sample: --call-graph, --kernel and --stack-size need --report, --folded, "
		       "--pprof or --flamegraph");
		return -1;
	}
	if (o->mode != GB_SAMPLE_LINES && !call_graph)
		o->stacks = GB_STACK_DWARF;
	if (o->stack_size && o->stacks != GB_STACK_DWARF) {
		gb_err("sample: --stack-size needs --call-graph dwarf");
		return -1;
	}
	if (o->faults && (o->mode != GB_SAMPLE_LINES || o->all || o->cgroup || o->npids > 1)) {
		gb_err("sample: --faults: one process (-p PID or -- CMD), JSONL output only");
		return -1;
	}
	if (o->range.kind == GB_RANGE_SYM && (o->all || o->cgroup || o->npids > 1)) {
		gb_err("sample: --range %s: a symbol range needs one process (-p PID or -- CMD)",
		       o->range.symbol);
		return -1;
	}
	return 0;
}
