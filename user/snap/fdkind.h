/* The kernel objects behind a snapshot's file descriptors that are not
 * files (docs/snapshot-format.md "fds"): what `gebpf resume` needs to make
 * them again (user/resume/rfdkind.c), read from /proc/PID/fdinfo as CRIU
 * reads it.
 *
 *   epoll     its interest list: each target fd with its events and data word
 *   eventfd   its counter and EFD_SEMAPHORE
 *   timerfd   its clock, the time left and the interval
 *   signalfd  its mask
 *   pipe      its inode (both ends in the process: one pipe), and the bytes
 *             it holds, read without taking them (tee(2)), on its first read
 *             end
 *   unix      a unix socket (sock_diag): its inode, its peer's and its type;
 *             a stream socket's received bytes, peeked (MSG_PEEK) through a
 *             copy of the fd (pidfd_getfd)
 *   inotify   each watch: its wd, mask and path (its file handle opened with
 *             open_by_handle_at on its filesystem's mount)
 *   memfd     its name, size, seals and (up to GB_FDK_MEMFD_MAX bytes) its
 *             contents
 *
 * Anything else (network sockets, devices, a pipe whose other end is
 * elsewhere) has no kind (or one resume does not make): resume names it
 * and puts /dev/null there. */
#ifndef GB_SNAP_FDKIND_H
#define GB_SNAP_FDKIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum gb_fdk_kind { GB_FDK_NONE, GB_FDK_EPOLL, GB_FDK_EVENTFD, GB_FDK_TIMERFD, GB_FDK_SIGNALFD,
		   GB_FDK_PIPE, GB_FDK_UNIX, GB_FDK_INOTIFY, GB_FDK_MEMFD, GB_FDK__COUNT };

#define GB_FDK_MEMFD_MAX (1u << 20)   /* a memfd's bytes kept in the note at most */

struct gb_fdk_watch {
	int wd;
	uint32_t mask;
	char *path;                    /* NULL: not found */
};

struct gb_fdk_epi {
	int fd;
	uint32_t events;
	uint64_t data;
};

struct gb_snap_fdk {
	uint8_t kind;                  /* enum gb_fdk_kind */
	uint64_t ino;                  /* pipe, unix */
	uint64_t peer;                 /* unix: its peer's inode (0: none) */
	int type;                      /* unix: SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET */
	bool has_bytes;                /* pipe: this fd carries the pipe's bytes;
					* unix: its received bytes */
	uint8_t *bytes;
	size_t nbytes;
	uint64_t count;                /* eventfd */
	bool semaphore;
	int clockid;                   /* timerfd */
	uint64_t value_ns, interval_ns;
	uint64_t sigmask;              /* signalfd (signals 1..64) */
	struct gb_fdk_epi *epi;        /* epoll */
	size_t nepi;
	struct gb_fdk_watch *watch;    /* inotify */
	size_t nwatch;
	char *name;                    /* memfd (has_bytes, bytes: its contents) */
	uint64_t size;
	uint32_t seals;
};

struct gb_snap_fd;
struct cJSON;

/* The kind of fd f of process pid (frozen), from its target and fdinfo:
 * f->k set (NULL: no kind).  seen: the pipes whose bytes were read already
 * (inodes, *nseen of them, grown here).  0, or -ENOMEM. */
int gb_fdk_capture(pid_t pid, struct gb_snap_fd *f, uint64_t **seen, size_t *nseen);
/* Its name in the note ("epoll", ...), or NULL for none. */
const char *gb_fdk_name(unsigned kind);
/* The note's fields of f's kind added to its JSON object o / read back
 * from it (an old note without "kind": none).  0, or -EINVAL with why. */
void gb_fdk_to_json(struct cJSON *o, const struct gb_snap_fdk *k);
int gb_fdk_from_json(const struct cJSON *o, struct gb_snap_fdk **out, const char **why);
void gb_fdk_free(struct gb_snap_fdk *k);

#endif
