/* `gebpf sample` JSONL lines: sample_out.h and docs/sample.md. */
#include "probe/sample_out.h"

#include <inttypes.h>

void gb_sample_out_sample(FILE *f, const struct gb_sample *s)
{
	fprintf(f, "{\"t\":\"sample\",\"vcpu\":%" PRIu32 ",\"tid\":%d,\"pc\":\"0x%" PRIx64
		"\",\"ns\":%" PRIu64 "}\n", s->cpu, (int)s->tid, s->pc, s->ns);
}

void gb_sample_out_fault(FILE *f, const struct gb_fault *x)
{
	fprintf(f, "{\"t\":\"fault\",\"vcpu\":%" PRIu32 ",\"tid\":%d,\"addr\":\"0x%" PRIx64
		"\",\"pc\":\"0x%" PRIx64 "\",\"err\":\"0x%" PRIx64 "\",\"ns\":%" PRIu64 "}\n",
		x->cpu, (int)x->tid, x->addr, x->ip, x->err, x->ns);
}

void gb_sample_out_summary(FILE *f, const struct gb_sample_summary *s)
{
	const struct gb_sampler_stats *st = &s->st;

	fprintf(f, "{\"t\":\"summary\",\"seen\":%" PRIu64 ",\"kept\":%" PRIu64 ",\"filtered\":%" PRIu64
		",\"filtered_pid\":%" PRIu64 ",\"filtered_range\":%" PRIu64 ",\"lost\":%" PRIu64
		",\"event\":\"%s\",\"hz\":%" PRIu64, st->seen, st->kept, st->other + st->out_of_range,
		st->other, st->out_of_range, st->lost, s->event, s->hz);
	if (s->has_range)
		fprintf(f, ",\"start\":\"0x%" PRIx64 "\",\"end\":\"0x%" PRIx64 "\"", s->start, s->end);
	else
		fprintf(f, ",\"start\":null,\"end\":null");
	if (s->faults)
		fprintf(f, ",\"faults\":%" PRIu64 ",\"faults_lost\":%" PRIu64, st->faults, st->faults_lost);
	fprintf(f, "}\n");
}
