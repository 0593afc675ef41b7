/* A server-like loop for attach tests: prints "ready", then answers each
 * line "N" read from stdin with "N -> R", where R comes from N calls of
 * `handle` (in range) with out-of-range work in between; with TICK_US > 0
 * it also runs `handle` on its own every TICK_US microseconds while no
 * request is waiting (so it is busy in the range whenever one attaches).
 * Answers depend only on the requests, not on timing or ticks.  At end of
 * input it prints "bye <requests>" and exits 0.  A poll() or read() that
 * fails (EINTR, or a leaked -ERESTART* code: never natively, as nothing
 * signals it) prints "poll: errno N" / "read: errno N".  TICK_US 0: no
 * ticks (blocked in poll() without a timeout while idle).
 * `handle` sits alone on its page (section .text.trap_server).
 * Usage: trap_server [TICK_US] (default 1000; at least 1000 or 0).
 * Range: `handle`. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long handle(long *slot, long i);

asm(".pushsection .text.trap_server,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl handle\n"
    "	.type handle,@function\n"
    "handle:\n"
    "	mov (%rdi), %rax\n"
    "	imul $31, %rax, %rax\n"
    "	add %rsi, %rax\n"
    "	and $0xffffff, %rax\n"
    "	mov %rax, (%rdi)\n"
    "	ret\n"
    "	.size handle, .-handle\n"
    "	.balign 4096\n"
    ".popsection\n");

static long work(long n)
{
	volatile long s = 0;
	for (long k = 0; k < n; k++)
		s += k;
	return s;
}

int main(int argc, char **argv)
{
	long tick_us = argc > 1 ? atol(argv[1]) : 1000;
	static long idle_slot[1] = {1};
	char line[128];
	size_t len = 0;
	long requests = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (;;) {
		struct pollfd p = {.fd = 0, .events = POLLIN};
		int r = poll(&p, 1, tick_us > 0 ? (int)(tick_us / 1000) : -1);
		if (r < 0) { /* never natively: no signal is sent to it */
			printf("poll: errno %d\n", errno);
			continue;
		}
		if (r == 0) {
			handle(idle_slot, 1); /* idle tick: in range, answers unaffected */
			continue;
		}
		ssize_t n = read(0, line + len, sizeof(line) - 1 - len);
		if (n < 0) {
			printf("read: errno %d\n", errno);
			continue;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		line[len] = 0;
		char *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			long req = atol(line);
			long slot[1] = {req};
			for (long i = 0; i < req; i++) {
				work(50);
				handle(slot, i);
			}
			printf("%ld -> %ld\n", req, slot[0]);
			requests++;
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len + 1);
		}
	}
	printf("bye %ld\n", requests);
	return 0;
}
