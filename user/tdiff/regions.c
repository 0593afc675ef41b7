/* Address regions of a trace, clustered online (regions.h). */
#include "tdiff/regions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

void gb_regions_init(struct gb_regions *rs, uint64_t gap)
{
	memset(rs, 0, sizeof(*rs));
	rs->gap = gap;
}

/* The last region with lo <= addr, or -1 (as a size_t: SIZE_MAX). */
static size_t below(const struct gb_regions *rs, uint64_t addr)
{
	size_t lo = 0, hi = rs->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rs->v[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

int gb_regions_touch(struct gb_regions *rs, uint64_t addr)
{
	uint64_t order = rs->touches++;
	if (rs->n && rs->v[rs->last].lo <= addr && addr <= rs->v[rs->last].hi)
		return 0;
	size_t i = below(rs, addr);
	bool join_lo = i != SIZE_MAX && (addr <= rs->v[i].hi || addr - rs->v[i].hi <= rs->gap);
	bool join_hi = i + 1 < rs->n && rs->v[i + 1].lo - addr <= rs->gap;
	if (join_lo && join_hi) {   /* addr bridges two regions: one now */
		struct gb_region *a = &rs->v[i], *b = &rs->v[i + 1];
		a->hi = b->hi;
		if (b->first < a->first) {
			a->first = b->first;
			a->anchor = b->anchor;
		}
		memmove(b, b + 1, (rs->n - i - 2) * sizeof(*b));
		rs->n--;
	} else if (join_lo) {
		if (addr > rs->v[i].hi)
			rs->v[i].hi = addr;
	} else if (join_hi) {
		i++;
		rs->v[i].lo = addr;
	} else {
		if (GB_GROW(&rs->v, &rs->cap, rs->n + 1))
			return -ENOMEM;
		i++;
		memmove(&rs->v[i + 1], &rs->v[i], (rs->n - i) * sizeof(rs->v[0]));
		rs->n++;
		rs->v[i] = (struct gb_region){ .lo = addr, .hi = addr, .anchor = addr, .first = order };
	}
	rs->last = i;
	return 0;
}

void gb_regions_finish(struct gb_regions *rs)
{
	/* Few regions: rank each by counting the ones touched before it. */
	for (size_t i = 0; i < rs->n; i++) {
		uint32_t k = 0;
		for (size_t j = 0; j < rs->n; j++)
			k += rs->v[j].first < rs->v[i].first;
		rs->v[i].index = k;
	}
	rs->finished = true;
}

const struct gb_region *gb_regions_find(const struct gb_regions *rs, uint64_t addr)
{
	size_t i = below(rs, addr);
	if (i == SIZE_MAX || addr > rs->v[i].hi)
		return NULL;
	return &rs->v[i];
}

const struct gb_region *gb_regions_by_index(const struct gb_regions *rs, uint32_t idx)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].index == idx)
			return &rs->v[i];
	return NULL;
}

void gb_regions_name(struct gb_regions *rs, const char *maps)
{
	for (const char *l = maps; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		l = nl ? nl + 1 : l + len;
		uint64_t lo, hi;
		int path_at = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || !path_at)
			continue;
		const char *path = line + path_at;
		if (!*path)
			continue;
		const char *base = path[0] == '/' && strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		for (size_t i = 0; i < rs->n; i++)
			if (!rs->v[i].name[0] && rs->v[i].anchor >= lo && rs->v[i].anchor < hi)
				snprintf(rs->v[i].name, sizeof(rs->v[i].name), "%s", base);
	}
}

void gb_regions_free(struct gb_regions *rs)
{
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}
