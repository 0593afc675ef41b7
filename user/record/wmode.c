/* The trace writer's choice of buffered or direct writes: see wmode.h. */
#include "record/wmode.h"

#include <string.h>

void gb_wmode__init(struct gb_wmode *m, bool can_direct)
{
	memset(m, 0, sizeof(*m));
	m->can_direct = can_direct;
	m->retry[0] = m->retry[1] = GB_WMODE_RETRY;
}

void gb_wmode__no_direct(struct gb_wmode *m)
{
	m->can_direct = m->direct = false;
}

static double rate_of(const struct gb_wmode *m)
{
	return (double)m->win_bytes * 1e9 / (double)(m->win_ns ? m->win_ns : 1);
}

bool gb_wmode__round(struct gb_wmode *m, uint64_t bytes, uint64_t ns)
{
	m->win_bytes += bytes;
	m->win_ns += ns;
	m->age[0] += bytes;
	m->age[1] += bytes;
	if (!m->can_direct)
		return false;
	int cur = m->direct, other = !cur;
	/* A way tried again that is already far behind the other ends its
	 * window at a quarter (its slow writes hold the trace). */
	bool behind = m->trying && m->win_bytes >= GB_WMODE_WINDOW / 4 &&
		      rate_of(m) * GB_WMODE_MARGIN < m->rate[other];
	if (m->win_bytes < GB_WMODE_WINDOW && !behind)
		return false;
	m->rate[cur] = rate_of(m);
	m->age[cur] = 0;
	m->win_bytes = m->win_ns = 0;
	if (m->trying) {
		/* The way just tried: kept when faster, else tried again twice as
		 * late as before (up to GB_WMODE_RETRY_MAX). */
		m->trying = false;
		bool won = m->rate[other] == 0 || m->rate[cur] * GB_WMODE_MARGIN >= m->rate[other];
		if (won) {
			m->retry[cur] = GB_WMODE_RETRY;
			return false;
		}
		if (m->retry[cur] < GB_WMODE_RETRY_MAX)
			m->retry[cur] *= 2;
		m->direct = other;
		m->switches++;
		return true;
	}
	bool go = m->rate[other] == 0 || m->age[other] >= m->retry[other] ||
		  m->rate[other] > m->rate[cur] * GB_WMODE_MARGIN;
	if (go) {
		m->trying = m->rate[other] == 0 || m->age[other] >= m->retry[other];
		m->direct = other;
		m->switches++;
	}
	return go;
}
