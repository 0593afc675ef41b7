/* A program for gebpf resume tests: it opens the file named by argv[1] and
 * reads its first 4 bytes, makes a socket pair, then calls resume_here()
 * (the point `gebpf snap --at resume_here` stops at).  After that it reads
 * the next 4 bytes of the file (the fd's offset must be restored), writes
 * one byte to the socket (a resumed process has /dev/null there: it
 * succeeds), grows the heap with malloc (brk must be restored) and prints
 * "<first> <next> <written> <heap check>".  Exit status 7. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((noinline)) int resume_here(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

int main(int argc, char **argv)
{
	char a[5] = { 0 }, b[5] = { 0 };
	int sv[2];
	int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
	if (fd < 0 || read(fd, a, 4) != 4 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	int k = resume_here(fd);
	if (read(fd, b, 4) != 4)
		return 2;
	ssize_t w = write(sv[0], "x", 1);
	char *p = NULL;
	int ok = 1;
	for (int i = 0; i < 32; i++) { /* 2 MiB in blocks malloc takes from brk */
		p = malloc(64 * 1024);
		if (!p)
			return 3;
		memset(p, k, 64 * 1024);
		ok &= sbrk(0) > (void *)p;
	}
	printf("%s %s %zd %d\n", a, b, w, ok && p[65535] == (char)k);
	return 7;
}
