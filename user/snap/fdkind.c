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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/grow.h"
#include "snap/snapshot.h"

static const char *const names[GB_FDK__COUNT] = {
	[GB_FDK_EPOLL] = "epoll", [GB_FDK_EVENTFD] = "eventfd", [GB_FDK_TIMERFD] = "timerfd",
	[GB_FDK_SIGNALFD] = "signalfd", [GB_FDK_PIPE] = "pipe", [GB_FDK_UNIX] = "unix",
	[GB_FDK_INOTIFY] = "inotify", [GB_FDK_MEMFD] = "memfd",
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
	for (size_t i = 0; i < k->nwatch; i++)
		free(k->watch[i].path);
	free(k->watch);
	free(k->name);
	free(k);
}

/* The mount point (in the target's view, under /proc/PID/root) of the
 * filesystem whose kernel dev_t is sdev (major << 20 | minor): an fd of it
 * (not O_PATH: open_by_handle_at takes no such fd), or -1. */
static int mount_of(pid_t pid, unsigned sdev)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	FILE *f = fopen(path, "re");
	int fd = -1;
	while (f && fd < 0 && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char mp[2048];
		if (sscanf(line, "%*u %*u %u:%u %*s %2047s", &maj, &min, mp) != 3 ||
		    maj != sdev >> 20 || min != (sdev & 0xfffff))
			continue;
		char at[2200];
		snprintf(at, sizeof(at), "/proc/%d/root%s", pid, mp);
		fd = open(at, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	}
	if (f)
		fclose(f);
	return fd;
}

/* One "inotify wd:..." line of fdinfo: the watch, its path found from its
 * file handle.  0, or -1 for a line that is not one. */
static int inotify_watch(pid_t pid, const char *line, struct gb_fdk_watch *w)
{
	unsigned wd, sdev, mask, hb;
	int type, n = 0;
	if (sscanf(line, "inotify wd:%x ino:%*x sdev:%x mask:%x ignored_mask:%*x fhandle-bytes:%x "
		   "fhandle-type:%x f_handle:%n", &wd, &sdev, &mask, &hb, (unsigned *)&type, &n) != 5 ||
	    !n || hb > 128)
		return -1;
	w->wd = (int)wd;
	w->mask = mask;
	struct file_handle *fh = malloc(sizeof(*fh) + hb);
	if (!fh)
		return 0;
	fh->handle_bytes = hb;
	fh->handle_type = type;
	unsigned char *hp = (unsigned char *)fh + sizeof(*fh);
	for (unsigned i = 0; i < hb; i++) {
		unsigned v;
		if (sscanf(line + n + 2 * i, "%2x", &v) != 1) {
			free(fh);
			return 0;
		}
		hp[i] = (unsigned char)v;
	}
	int m = mount_of(pid, sdev);
	int fd = m < 0 ? -1 : open_by_handle_at(m, fh, O_PATH | O_CLOEXEC);
	free(fh);
	if (fd >= 0) {
		char lp[64], target[4096];
		snprintf(lp, sizeof(lp), "/proc/self/fd/%d", fd);
		ssize_t len = readlink(lp, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = 0;
			w->path = strdup(target);
		}
		close(fd);
	}
	if (m >= 0)
		close(m);
	return 0;
}

/* A memfd's name, size, seals and contents (up to GB_FDK_MEMFD_MAX bytes),
 * through a file of gebpf's own on it (/proc/PID/fd/N opens the same one). */
static void memfd_state(pid_t pid, int fd, const char *target, struct gb_snap_fdk *k)
{
	const char *n = target + strlen("/memfd:");
	const char *e = strstr(n, " (deleted)");
	k->name = strndup(n, e ? (size_t)(e - n) : strlen(n));
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	int m = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (m < 0 || fstat(m, &st))
		goto out;
	k->size = (uint64_t)st.st_size;
	int seals = fcntl(m, F_GET_SEALS);
	k->seals = seals > 0 ? (uint32_t)seals : 0;
	if (k->size > GB_FDK_MEMFD_MAX || !(k->bytes = malloc(k->size ? k->size : 1)))
		goto out;
	size_t got = 0;
	while (got < k->size) {
		ssize_t r = pread(m, k->bytes + got, k->size - got, (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	k->nbytes = got;
	k->has_bytes = got == k->size;
out:
	if (m >= 0)
		close(m);
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
		} else if (k->kind == GB_FDK_INOTIFY && !strncmp(line, "inotify wd:", 11)) {
			if (GB_GROW(&k->watch, &cap, k->nwatch + 1)) {
				r = -ENOMEM;
				break;
			}
			k->watch[k->nwatch] = (struct gb_fdk_watch){ 0 };
			if (inotify_watch(pid, line, &k->watch[k->nwatch]) == 0)
				k->nwatch++;
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

static int cmp_wd(const void *a, const void *b)
{
	const struct gb_fdk_watch *x = a, *y = b;
	return (x->wd > y->wd) - (x->wd < y->wd);
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
	if (!strcmp(f->target, "anon_inode:inotify"))
		kind = GB_FDK_INOTIFY;
	if (!strncmp(f->target, "/memfd:", 7))
		kind = GB_FDK_MEMFD;
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
	} else if (kind == GB_FDK_MEMFD) {
		memfd_state(pid, f->fd, f->target, k);
	} else if (kind == GB_FDK_UNIX) {
		k->ino = ino;
		k->peer = peer;
		k->type = type;
		unix_bytes(pid, f->fd, rq, k);
	} else if (parse_fdinfo(pid, f->fd, k) == -ENOMEM) {
		gb_fdk_free(k);
		return -ENOMEM;
	}
	if (kind == GB_FDK_INOTIFY) /* (fdinfo lists the newest first; added again in wd order) */
		qsort(k->watch, k->nwatch, sizeof(*k->watch), cmp_wd);
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
	case GB_FDK_INOTIFY: {
		cJSON *a = cJSON_AddArrayToObject(o, "watches");
		for (size_t i = 0; i < k->nwatch; i++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "wd", k->watch[i].wd);
			cJSON_AddItemToObject(e, "mask", hexnum(k->watch[i].mask));
			cJSON_AddItemToObject(e, "path", k->watch[i].path ?
					      cJSON_CreateString(k->watch[i].path) : cJSON_CreateNull());
			cJSON_AddItemToArray(a, e);
		}
		break;
	}
	case GB_FDK_MEMFD:
	case GB_FDK_PIPE:
	case GB_FDK_UNIX: {
		if (k->kind != GB_FDK_MEMFD)
			cJSON_AddNumberToObject(o, "ino", (double)k->ino);
		if (k->kind == GB_FDK_UNIX) {
			cJSON_AddNumberToObject(o, "peer", (double)k->peer);
			cJSON_AddNumberToObject(o, "type", k->type);
		}
		if (k->kind == GB_FDK_MEMFD) {
			cJSON_AddItemToObject(o, "name", cJSON_CreateString(k->name ? k->name : ""));
			cJSON_AddItemToObject(o, "size", hexnum(k->size));
			cJSON_AddItemToObject(o, "seals", hexnum(k->seals));
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
	case GB_FDK_INOTIFY: {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "watches"), *e;
		ok = cJSON_IsArray(a);
		k->watch = ok ? calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(*k->watch)) : NULL;
		ok = ok && k->watch;
		const cJSON *list = ok ? a : NULL;
		cJSON_ArrayForEach(e, list) {
			uint64_t mask;
			n = cJSON_GetObjectItemCaseSensitive(e, "wd");
			const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "path"));
			ok &= cJSON_IsNumber(n) && get_u64(e, "mask", &mask);
			if (ok)
				k->watch[k->nwatch++] = (struct gb_fdk_watch){ (int)n->valuedouble,
									(uint32_t)mask,
									path ? strdup(path) : NULL };
		}
		*why = "an inotify fd needs its watches (wd, mask, path)";
		break;
	}
	case GB_FDK_MEMFD:
	case GB_FDK_PIPE:
	case GB_FDK_UNIX: {
		n = cJSON_GetObjectItemCaseSensitive(o, "ino");
		const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "bytes"));
		ok = k->kind == GB_FDK_MEMFD || cJSON_IsNumber(n);
		k->ino = cJSON_IsNumber(n) ? (uint64_t)n->valuedouble : 0;
		if (k->kind == GB_FDK_MEMFD) {
			uint64_t seals = 0;
			const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name"));
			ok = name && get_u64(o, "size", &k->size) && get_u64(o, "seals", &seals);
			k->name = name ? strdup(name) : NULL;
			k->seals = (uint32_t)seals;
		}
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
		*why = k->kind == GB_FDK_MEMFD ? "a memfd needs its name, size and seals (bytes in hex)"
			: "a pipe or unix socket fd needs its inode (a socket its peer and type; bytes "
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
