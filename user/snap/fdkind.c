/* Kernel objects behind fds: see fdkind.h. */
#include "snap/fdkind.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/grow.h"
#include "snap/snapshot.h"

static const char *const names[GB_FDK__COUNT] = {
	[GB_FDK_EPOLL] = "epoll", [GB_FDK_EVENTFD] = "eventfd", [GB_FDK_TIMERFD] = "timerfd",
	[GB_FDK_SIGNALFD] = "signalfd", [GB_FDK_PIPE] = "pipe", [GB_FDK_UNIX] = "unix",
};

const char *gb_fdk_name(unsigned kind)
{
	return kind < GB_FDK__COUNT ? names[kind] : NULL;
}

void gb_fdk_free(struct gb_snap_fdk *k)
{
	if (!k)
		return;
	free(k->bytes);
	free(k->epi);
	free(k);
}

/* fdinfo's lines after the common ones, parsed for kind k. */
static int parse_fdinfo(pid_t pid, int fd, struct gb_snap_fdk *k)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t cap = 0;
	int r = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, c, d;
		unsigned x;
		int t;
		if (k->kind == GB_FDK_EPOLL &&
		    sscanf(line, "tfd: %d events: %x data: %llx", &t, &x, &a) == 3) {
			if (GB_GROW(&k->epi, &cap, k->nepi + 1)) {
				r = -ENOMEM;
				break;
			}
			k->epi[k->nepi++] = (struct gb_fdk_epi){ t, x, a };
		} else if (sscanf(line, "eventfd-count: %llx", &a) == 1) {
			k->count = a;
		} else if (sscanf(line, "eventfd-semaphore: %llu", &a) == 1) {
			k->semaphore = a != 0;
		} else if (sscanf(line, "clockid: %d", &t) == 1) {
			k->clockid = t;
		} else if (sscanf(line, "it_value: (%llu, %llu)", &a, &b) == 2) {
			k->value_ns = a * 1000000000ull + b;
		} else if (sscanf(line, "it_interval: (%llu, %llu)", &c, &d) == 2) {
			k->interval_ns = c * 1000000000ull + d;
		} else if (sscanf(line, "sigmask: %llx", &a) == 1) {
			k->sigmask = a;
		}
	}
	fclose(f);
	return r;
}

/* The bytes pipe fd of pid holds, without taking them: a read end of our
 * own on it (/proc/PID/fd/N opens the same pipe) tee'd into a pipe of ours. */
static void pipe_bytes(pid_t pid, int fd, struct gb_snap_fdk *k)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	int in = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), p[2] = { -1, -1 };
	if (in < 0 || pipe2(p, O_NONBLOCK | O_CLOEXEC))
		goto out;
	int size = fcntl(in, F_GETPIPE_SZ);
	if (size > 0)
		fcntl(p[1], F_SETPIPE_SZ, size);
	ssize_t n = tee(in, p[1], (size_t)(size > 0 ? size : 65536), SPLICE_F_NONBLOCK);
	k->has_bytes = true;
	if (n <= 0)
		goto out;
	k->bytes = malloc((size_t)n);
	if (k->bytes && read(p[0], k->bytes, (size_t)n) == n)
		k->nbytes = (size_t)n;
out:
	if (in >= 0)
		close(in);
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
}

/* Unix socket ino (sock_diag, this network namespace): its type, its
 * peer's inode and how many bytes wait in its receive queue.  0, or -1
 * when it is not a unix socket here. */
static int unix_diag(uint64_t ino, int *type, uint64_t *peer, uint32_t *rq)
{
	int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return -1;
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} q = { { sizeof(q), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0 },
		{ AF_UNIX, 0, 0, (uint32_t)-1, (uint32_t)ino, UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN,
		  { (uint32_t)-1, (uint32_t)-1 } } };
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	char buf[8192];
	int r = -1;
	if (sendto(s, &q, sizeof(q), 0, (struct sockaddr *)&nl, sizeof(nl)) != sizeof(q))
		goto out;
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (n < (ssize_t)sizeof(*h) || !NLMSG_OK(h, (size_t)n) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
		goto out;
	struct unix_diag_msg *m = NLMSG_DATA(h);
	if (m->udiag_ino != (uint32_t)ino)
		goto out;
	*type = m->udiag_type;
	*peer = 0;
	*rq = 0;
	int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
	for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == UNIX_DIAG_PEER)
			*peer = *(uint32_t *)RTA_DATA(a);
		else if (a->rta_type == UNIX_DIAG_RQLEN)
			*rq = ((struct unix_diag_rqlen *)RTA_DATA(a))->udiag_rqueue;
	}
	r = 0;
out:
	close(s);
	return r;
}

/* A stream socket's received bytes, peeked through a copy of fd. */
static void unix_bytes(pid_t pid, int fd, uint32_t rq, struct gb_snap_fdk *k)
{
	k->has_bytes = true;
	if (!rq || k->type != SOCK_STREAM)
		return;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int s = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	if (s >= 0 && (k->bytes = malloc(rq))) {
		ssize_t n = recv(s, k->bytes, rq, MSG_PEEK | MSG_DONTWAIT);
		k->nbytes = n > 0 ? (size_t)n : 0;
	}
	if (s >= 0)
		close(s);
	if (pfd >= 0)
		close(pfd);
}

int gb_fdk_capture(pid_t pid, struct gb_snap_fd *f, uint64_t **seen, size_t *nseen)
{
	static const struct { const char *target; uint8_t kind; } anon[] = {
		{ "anon_inode:[eventpoll]", GB_FDK_EPOLL }, { "anon_inode:[eventfd]", GB_FDK_EVENTFD },
		{ "anon_inode:[timerfd]", GB_FDK_TIMERFD }, { "anon_inode:[signalfd]", GB_FDK_SIGNALFD },
	};
	unsigned long long ino;
	uint8_t kind = GB_FDK_NONE;
	f->k = NULL;
	if (!f->target)
		return 0;
	for (size_t i = 0; i < sizeof(anon) / sizeof(anon[0]); i++)
		if (!strcmp(f->target, anon[i].target))
			kind = anon[i].kind;
	if (sscanf(f->target, "pipe:[%llu]", &ino) == 1)
		kind = GB_FDK_PIPE;
	int type;
	uint64_t peer;
	uint32_t rq;
	if (sscanf(f->target, "socket:[%llu]", &ino) == 1 && !unix_diag(ino, &type, &peer, &rq))
		kind = GB_FDK_UNIX;
	if (kind == GB_FDK_NONE)
		return 0;
	struct gb_snap_fdk *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->kind = kind;
	if (kind == GB_FDK_PIPE) {
		k->ino = ino;
		bool had = false;
		for (size_t i = 0; i < *nseen; i++)
			had |= (*seen)[i] == ino;
		if (!had && (f->flags & O_ACCMODE) == O_RDONLY) {
			size_t cap = *nseen;
			if (GB_GROW(seen, &cap, *nseen + 1)) {
				free(k);
				return -ENOMEM;
			}
			(*seen)[(*nseen)++] = ino;
			pipe_bytes(pid, f->fd, k);
		}
	} else if (kind == GB_FDK_UNIX) {
		k->ino = ino;
		k->peer = peer;
		k->type = type;
		unix_bytes(pid, f->fd, rq, k);
	} else if (parse_fdinfo(pid, f->fd, k) == -ENOMEM) {
		gb_fdk_free(k);
		return -ENOMEM;
	}
	f->k = k;
	return 0;
}

static cJSON *hexnum(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	return cJSON_CreateString(b);
}

void gb_fdk_to_json(cJSON *o, const struct gb_snap_fdk *k)
{
	if (!k || !gb_fdk_name(k->kind))
		return;
	cJSON_AddStringToObject(o, "kind", gb_fdk_name(k->kind));
	switch (k->kind) {
	case GB_FDK_EPOLL: {
		cJSON *a = cJSON_AddArrayToObject(o, "interest");
		for (size_t i = 0; i < k->nepi; i++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "fd", k->epi[i].fd);
			cJSON_AddItemToObject(e, "events", hexnum(k->epi[i].events));
			cJSON_AddItemToObject(e, "data", hexnum(k->epi[i].data));
			cJSON_AddItemToArray(a, e);
		}
		break;
	}
	case GB_FDK_EVENTFD:
		cJSON_AddItemToObject(o, "count", hexnum(k->count));
		cJSON_AddBoolToObject(o, "semaphore", k->semaphore);
		break;
	case GB_FDK_TIMERFD:
		cJSON_AddNumberToObject(o, "clockid", k->clockid);
		cJSON_AddItemToObject(o, "value_ns", hexnum(k->value_ns));
		cJSON_AddItemToObject(o, "interval_ns", hexnum(k->interval_ns));
		break;
	case GB_FDK_SIGNALFD:
		cJSON_AddItemToObject(o, "sigmask", hexnum(k->sigmask));
		break;
	case GB_FDK_PIPE:
	case GB_FDK_UNIX: {
		cJSON_AddNumberToObject(o, "ino", (double)k->ino);
		if (k->kind == GB_FDK_UNIX) {
			cJSON_AddNumberToObject(o, "peer", (double)k->peer);
			cJSON_AddNumberToObject(o, "type", k->type);
		}
		if (!k->has_bytes)
			break;
		char *h = malloc(2 * k->nbytes + 1);
		if (!h)
			break;
		for (size_t i = 0; i < k->nbytes; i++)
			snprintf(h + 2 * i, 3, "%02x", k->bytes[i]);
		h[2 * k->nbytes] = 0;
		cJSON_AddStringToObject(o, "bytes", h);
		free(h);
		break;
	}
	}
}

static bool get_u64(const cJSON *o, const char *name, uint64_t *out)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
	char *end;
	if (!s || strncmp(s, "0x", 2))
		return false;
	errno = 0;
	*out = strtoull(s + 2, &end, 16);
	return !errno && !*end && end != s + 2;
}

int gb_fdk_from_json(const cJSON *o, struct gb_snap_fdk **out, const char **why)
{
	*out = NULL;
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind"));
	if (!name)
		return 0;
	struct gb_snap_fdk *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	for (unsigned i = 1; i < GB_FDK__COUNT; i++)
		if (!strcmp(name, names[i]))
			k->kind = (uint8_t)i;
	bool ok = k->kind != GB_FDK_NONE;
	*why = "an fd of an unknown kind";
	const cJSON *n;
	switch (k->kind) {
	case GB_FDK_EPOLL: {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "interest"), *e;
		ok = cJSON_IsArray(a);
		k->epi = ok ? calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*k->epi)) : NULL;
		ok = ok && k->epi;
		const cJSON *list = ok ? a : NULL;
		cJSON_ArrayForEach(e, list) {
			uint64_t ev, data;
			n = cJSON_GetObjectItemCaseSensitive(e, "fd");
			ok &= cJSON_IsNumber(n) && get_u64(e, "events", &ev) && get_u64(e, "data", &data);
			if (ok)
				k->epi[k->nepi++] = (struct gb_fdk_epi){ (int)n->valuedouble, (uint32_t)ev, data };
		}
		*why = "an epoll fd needs its interest list (fd, events, data)";
		break;
	}
	case GB_FDK_EVENTFD:
		ok = get_u64(o, "count", &k->count);
		k->semaphore = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "semaphore"));
		*why = "an eventfd needs its count";
		break;
	case GB_FDK_TIMERFD:
		n = cJSON_GetObjectItemCaseSensitive(o, "clockid");
		ok = cJSON_IsNumber(n) && get_u64(o, "value_ns", &k->value_ns) &&
		     get_u64(o, "interval_ns", &k->interval_ns);
		k->clockid = ok ? (int)n->valuedouble : 0;
		*why = "a timerfd needs clockid, value_ns and interval_ns";
		break;
	case GB_FDK_SIGNALFD:
		ok = get_u64(o, "sigmask", &k->sigmask);
		*why = "a signalfd needs its sigmask";
		break;
	case GB_FDK_PIPE:
	case GB_FDK_UNIX: {
		n = cJSON_GetObjectItemCaseSensitive(o, "ino");
		const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "bytes"));
		ok = cJSON_IsNumber(n);
		k->ino = ok ? (uint64_t)n->valuedouble : 0;
		if (k->kind == GB_FDK_UNIX) {
			const cJSON *pe = cJSON_GetObjectItemCaseSensitive(o, "peer");
			const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
			ok = ok && cJSON_IsNumber(pe) && cJSON_IsNumber(ty);
			k->peer = ok ? (uint64_t)pe->valuedouble : 0;
			k->type = ok ? (int)ty->valuedouble : 0;
		}
		if (ok && h) {
			size_t len = strlen(h);
			k->has_bytes = true;
			k->bytes = malloc(len / 2 + 1);
			ok = k->bytes && len % 2 == 0;
			for (size_t i = 0; ok && i < len / 2; i++) {
				unsigned v;
				ok = sscanf(h + 2 * i, "%2x", &v) == 1;
				k->bytes[i] = (uint8_t)v;
			}
			k->nbytes = len / 2;
		}
		*why = "a pipe or unix socket fd needs its inode (a socket its peer and type; bytes "
		       "in hex)";
		break;
	}
	}
	if (!ok) {
		gb_fdk_free(k);
		return -EINVAL;
	}
	*out = k;
	return 0;
}
