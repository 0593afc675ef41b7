/* The trace writer's choice of buffered or direct writes: see wmode.h. */
#include "record/wmode.h"

#include <string.h>

void gb_wmode__init(struct gb_wmode *m, bool can_direct)
{
	memset(m, 0, sizeof(*m));
	m->can_direct = can_direct;
}

void gb_wmode__no_direct(struct gb_wmode *m)
{
	m->can_direct = m->direct = false;
}

bool gb_wmode__round(struct gb_wmode *m, uint64_t bytes, uint64_t ns)
{
	m->win_bytes += bytes;
	m->win_ns += ns;
	m->age[0] += bytes;
	m->age[1] += bytes;
	if (!m->can_direct || m->win_bytes < GB_WMODE_WINDOW)
		return false;
	int cur = m->direct, other = !cur;
	m->rate[cur] = (double)m->win_bytes * 1e9 / (double)(m->win_ns ? m->win_ns : 1);
	m->age[cur] = 0;
	m->win_bytes = m->win_ns = 0;
	bool go = m->rate[other] == 0 || m->age[other] >= GB_WMODE_RETRY ||
		  m->rate[other] > m->rate[cur] * GB_WMODE_MARGIN;
	if (go) {
		m->direct = other;
		m->switches++;
	}
	return go;
}
