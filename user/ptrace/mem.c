#include "ptrace/mem.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/page.h"

static ssize_t proc_mem_io(pid_t pid, uint64_t addr, void *buf, size_t len, bool write)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int fd = open(path, write ? O_RDWR | O_CLOEXEC : O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t r = write ? pwrite(fd, (const char *)buf + done, len - done, (off_t)(addr + done))
				  : pread(fd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		done += (size_t)r;
	}
	int e = errno;
	close(fd);
	return done ? (ssize_t)done : -(e ? e : EIO);
}

ssize_t gb_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	/* Fast path: one process_vm_readv; it stops at the first unreadable
	 * page, so on a short read continue page by page with the fallback. */
	while (done < len) {
		struct iovec local = { (char *)buf + done, len - done };
		struct iovec remote = { (void *)(uintptr_t)(addr + done), len - done };
		ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		/* The page at addr+done is not readable this way: /proc/PID/mem
		 * (it can read PROT_NONE-less pages like VM_IO-free guard gaps
		 * and pages process_vm_readv refuses) for up to one page. */
		uint64_t a = addr + done;
		size_t chunk = (size_t)(gb_page_down(a) + GB_PAGE_SIZE - a);
		if (chunk > len - done)
			chunk = len - done;
		ssize_t p = proc_mem_io(pid, a, (char *)buf + done, chunk, false);
		if (p <= 0)
			return done ? (ssize_t)done : (r < 0 ? -errno : p);
		done += (size_t)p;
	}
	return (ssize_t)done;
}

ssize_t gb_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	return proc_mem_io(pid, addr, (void *)buf, len, true);
}
