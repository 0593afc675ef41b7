/* Threads that spend their time blocked in system calls made through the
 * program's own syscall instruction (`gb_syscall`, assembly, on a page of
 * its own), plus one in glibc's pthread_cond_wait:
 *   sleeper: nanosleep(1 ms), forever
 *   reader:  read() of 8 bytes from a pipe, forever
 *   waiter:  FUTEX_WAIT on a word while it is unchanged, forever
 *   condw:   pthread_cond_wait, forever
 *   waker:   every 2 ms writes the pipe, bumps and wakes the word, signals
 *            the condition
 * Each thread counts its wake-ups.  The main thread answers each line on
 * stdin with "beat S R W C K" (the five counts); EOF ends it, exit 0.  A
 * syscall that fails (an interrupted call not restarted) prints
 * "errno N in NAME" and exits 3.  Prints "ready" once all counts moved.
 * Range: `gb_syscall`. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long gb_syscall(long nr, long a, long b, long c, long d);
asm(".pushsection .text.trap_block,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl gb_syscall\n"
    "	.type gb_syscall,@function\n"
    "gb_syscall:\n"
    "	mov %rdi, %rax\n"
    "	mov %rsi, %rdi\n"
    "	mov %rdx, %rsi\n"
    "	mov %rcx, %rdx\n"
    "	mov %r8, %r10\n"
    "	syscall\n"
    "	ret\n"
    "	.size gb_syscall, .-gb_syscall\n"
    "	.balign 4096\n"
    ".popsection\n");

enum { S, R, W, C, K, N };
static volatile unsigned long counts[N];
static int pfd[2];
static int word;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned long cv_gen;

static long sys(const char *what, long nr, long a, long b, long c, long d)
{
	long r = gb_syscall(nr, a, b, c, d);
	if (r < 0 && r > -4096 && !(nr == SYS_futex && (r == -EAGAIN || r == -EINTR))) {
		printf("errno %ld in %s\n", -r, what);
		exit(3);
	}
	return r;
}

static void *sleeper(void *a)
{
	struct timespec ts = { 0, 1000000 };
	for (;;) {
		sys("nanosleep", SYS_nanosleep, (long)&ts, 0, 0, 0);
		counts[S]++;
	}
	return a;
}

static void *reader(void *a)
{
	long v;
	for (;;) {
		if (sys("read", SYS_read, pfd[0], (long)&v, sizeof(v), 0) != sizeof(v)) {
			printf("short read\n");
			exit(3);
		}
		counts[R]++;
	}
	return a;
}

static void *waiter(void *a)
{
	for (;;) {
		int seen = __atomic_load_n(&word, __ATOMIC_SEQ_CST);
		sys("futex", SYS_futex, (long)&word, FUTEX_WAIT_PRIVATE, seen, 0);
		if (__atomic_load_n(&word, __ATOMIC_SEQ_CST) != seen)
			counts[W]++;
	}
	return a;
}

static void *condw(void *a)
{
	pthread_mutex_lock(&mu);
	for (;;) {
		unsigned long g = cv_gen;
		while (cv_gen == g)
			pthread_cond_wait(&cv, &mu);
		counts[C]++;
	}
	return a;
}

static void *waker(void *a)
{
	struct timespec ts = { 0, 2000000 };
	long v = 1;
	for (;;) {
		nanosleep(&ts, NULL);
		if (write(pfd[1], &v, sizeof(v)) != sizeof(v))
			exit(3);
		__atomic_add_fetch(&word, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, 0);
		pthread_mutex_lock(&mu);
		cv_gen++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		counts[K]++;
	}
	return a;
}

int main(void)
{
	void *(*fn[N])(void *) = { sleeper, reader, waiter, condw, waker };
	pthread_t th[N];
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(pfd))
		return 1;
	for (int k = 0; k < N; k++)
		pthread_create(&th[k], NULL, fn[k], NULL);
	for (int k = 0; k < N; k++)
		while (!counts[k])
			usleep(1000);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		printf("beat %lu %lu %lu %lu %lu\n", counts[S], counts[R], counts[W], counts[C], counts[K]);
	return 0;
}
