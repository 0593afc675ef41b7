/* The probe trap's redirects (probetrap.h contract 7; docs/bpf.md
 * "Redirects"): the maps and switch of bpf/probetrap.bpf.c that send a hit
 * straight on at another address, for kernels whose uprobe programs may
 * write ip (loaded so by probetrap.c). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>

#include "probe/probetrap.h"
#include "probe/probetrap_int.h"
#include "probetrap.skel.h"

bool gb_probetrap__redirects(const struct gb_probetrap *p)
{
	return p && p->redirect;
}

int gb_probetrap__redirect_add(struct gb_probetrap *p, uint64_t addr, uint64_t target)
{
	__u64 key = addr, val = target;
	if (!gb_probetrap__redirects(p))
		return -ENOTSUP;
	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.pt_redirect), &key, &val, BPF_ANY))
		return -errno;
	return 0;
}

void gb_probetrap__redirect_thread(struct gb_probetrap *p, pid_t tid, bool on)
{
	__u32 key = (__u32)tid;
	__u8 one = 1;
	if (!gb_probetrap__redirects(p))
		return;
	int fd = bpf_map__fd(p->skel->maps.pt_known);
	if (on)
		bpf_map_update_elem(fd, &key, &one, BPF_ANY);
	else
		bpf_map_delete_elem(fd, &key);
}

void gb_probetrap__redirect_enable(struct gb_probetrap *p, bool on)
{
	if (gb_probetrap__redirects(p) && p->skel->bss)
		__atomic_store_n(&p->skel->bss->redirect_on, on ? 1u : 0u, __ATOMIC_RELEASE);
}
