#include "probe/counters.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdlib.h>

uint64_t gb_counter_sum(int counters_fd, uint32_t slot)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t sum = 0, *v;

	if (ncpu <= 0)
		return 0;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return 0;
	if (bpf_map_lookup_elem(counters_fd, &slot, v) == 0)
		for (int i = 0; i < ncpu; i++)
			sum += v[i];
	free(v);
	return sum;
}
