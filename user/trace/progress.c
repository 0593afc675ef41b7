#include "trace/progress.h"

#include <stdio.h>
#include <unistd.h>

void gb_progress_init(struct gb_progress *p)
{
	p->on = isatty(STDERR_FILENO);
	p->shown = false;
	p->last_events = 0;
	clock_gettime(CLOCK_MONOTONIC, &p->last);
}

void gb_progress_tick(struct gb_progress *p, const struct gb_jsonl *out, uint64_t vt)
{
	if (!p->on)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double dt = (double)(now.tv_sec - p->last.tv_sec) + (double)(now.tv_nsec - p->last.tv_nsec) / 1e9;
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
