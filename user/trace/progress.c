#include "trace/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"

void gb_progress_init(struct gb_progress *p)
{
	p->on = isatty(STDERR_FILENO);
	p->shown = false;
	p->last_events = 0;
	p->last = gb_mono_s();
}

void gb_progress_tick(struct gb_progress *p, const struct gb_jsonl *out, uint64_t vt)
{
	if (!p->on)
		return;
	double now = gb_mono_s(), dt = now - p->last;
	if (dt < 1.0)
		return;
	struct gb_jsonl_counts c;
	gb_jsonl__counts(out, &c);
	fprintf(stderr, "\rgebpf: trace: %llu insns in range, %.0f events/s, %llu dropped   ",
		(unsigned long long)vt, (double)(c.events - p->last_events) / dt,
		(unsigned long long)c.dropped);
	p->shown = true;
	p->last = now;
	p->last_events = c.events;
}

void gb_progress_done(struct gb_progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
}
