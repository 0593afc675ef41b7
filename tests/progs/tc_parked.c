/* A thread parked inside the range when a tracer attaches: `worker` calls
 * `traced`, which reads 8 bytes from a pipe with its own inline `read`
 * syscall and folds them into its accumulator; between calls nothing else
 * runs, so the thread spends its life blocked in the range's syscall.  The
 * main thread (never in the range) prints "ready TID" (the worker's thread
 * id) once the worker exists, then turns each line of stdin (a decimal N)
 * into one write of an 8-byte word (N * 0x9e3779b1 + 1) to the pipe; on EOF
 * it writes a 0 word, which ends the worker, and prints the checksum.
 * A test attaches (`-p PID`) while the worker is blocked in the read (its
 * /proc/PID/task/TID/syscall names read with a PC in the range), then
 * feeds stdin.  Usage: tc_parked < lines.  Exit 0; 1 if a syscall fails.
 * Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fds[2];
static volatile long tid;
static unsigned long result;

__attribute__((noinline)) long traced(long fd, unsigned long *acc)
{
	unsigned long word = 0;
	long ret;
	__asm__ volatile("syscall" : "=a"(ret)
			 : "0"((long)SYS_read), "D"(fd), "S"(&word), "d"(8L)
			 : "rcx", "r11", "memory");
	if (ret != 8)
		return -1;
	for (int k = 0; k < 8; k++)
		*acc = *acc * 5 + ((word >> (8 * k)) & 0xff);
	return word != 0;
}

static void *worker(void *arg)
{
	unsigned long acc = 1;
	long r;
	tid = syscall(SYS_gettid);
	while ((r = traced(fds[0], &acc)) == 1)
		;
	result = r < 0 ? 0 : acc;
	return NULL;
}

static int put(unsigned long word)
{
	return write(fds[1], &word, 8) == 8 ? 0 : -1;
}

int main(void)
{
	pthread_t t;
	char line[64];
	if (pipe(fds) || pthread_create(&t, NULL, worker, NULL))
		return 1;
	while (!tid)
		usleep(1000);
	printf("ready %ld\n", tid);
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		if (put(strtoul(line, NULL, 10) * 0x9e3779b1ul + 1))
			return 1;
	if (put(0))
		return 1;
	pthread_join(t, NULL);
	printf("checksum %lx\n", result);
	return result ? 0 : 1;
}
