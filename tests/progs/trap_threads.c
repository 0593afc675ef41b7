/* Four threads call `traced`; two of them block in a syscall made from
 * INSIDE it, and only the other two can wake them, after their own calls of
 * `traced`:
 *   thread 0: K calls, then one call that read()s 8 bytes from a pipe, K more
 *   thread 1: K calls, then one call that futex-waits until a word is set, K more
 *   thread 2: sleeps DELAY_MS, K calls, then sets the word and wakes thread 1
 *   thread 3: sleeps DELAY_MS, K calls, then writes 8 bytes into the pipe
 * A tracer that keeps the range closed to others while thread 0 or 1 is
 * blocked inside it deadlocks the program.  `traced` is assembly (the
 * syscalls are its own `syscall` instructions) on a page of its own.
 *
 * Usage: trap_threads [K [DELAY_MS]] (defaults 20, 200).  Prints one line
 * per thread and a checksum, independent of scheduling; exit 0.
 * Range: `traced`. */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* long traced(long *slot, long i, long op, long arg): slot[0] = slot[0]*31+i;
 * op 1: read(arg, &slot[1], 8), slot[0] += slot[1];
 * op 2: futex-wait while *(int *)arg == 0, slot[0] += *(int *)arg.
 * Returns slot[0]. */
long traced(long *slot, long i, long op, long arg);

asm(".pushsection .text.trap_threads,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl traced\n"
    "	.type traced,@function\n"
    "traced:\n"
    "	mov (%rdi), %rax\n"
    "	imul $31, %rax, %rax\n"
    "	add %rsi, %rax\n"
    "	mov %rax, (%rdi)\n"
    "	cmp $1, %rdx\n"
    "	je 1f\n"
    "	cmp $2, %rdx\n"
    "	je 3f\n"
    "	ret\n"
    "1:	push %rdi\n"                     /* read(arg, &slot[1], 8) */
    "	lea 8(%rdi), %rsi\n"
    "	mov %rcx, %rdi\n"
    "	mov $8, %edx\n"
    "	xor %eax, %eax\n"                /* SYS_read */
    "	syscall\n"
    "	pop %rdi\n"
    "	mov 8(%rdi), %rax\n"
    "	add %rax, (%rdi)\n"
    "	mov (%rdi), %rax\n"
    "	ret\n"
    "3:	mov (%rcx), %eax\n"              /* futex wait while *arg == 0 */
    "	test %eax, %eax\n"
    "	jnz 4f\n"
    "	push %rdi\n"
    "	push %rcx\n"
    "	mov %rcx, %rdi\n"
    "	mov $128, %esi\n"                /* FUTEX_WAIT | FUTEX_PRIVATE_FLAG */
    "	xor %edx, %edx\n"                /* while the word is 0 */
    "	xor %r10d, %r10d\n"              /* no timeout */
    "	mov $202, %eax\n"                /* SYS_futex */
    "	syscall\n"
    "	pop %rcx\n"
    "	pop %rdi\n"
    "	jmp 3b\n"
    "4:	add %rax, (%rdi)\n"
    "	mov (%rdi), %rax\n"
    "	ret\n"
    "	.size traced, .-traced\n"
    "	.balign 4096\n"
    ".popsection\n");

struct worker {
	int id;
	long slot[2];
	long acc;
};

static long k_calls = 20, delay_ms = 200;
static int pipefd[2];
static int word; /* the futex */

static void calls(struct worker *w, long from, long n)
{
	for (long i = from; i < from + n; i++)
		w->acc += traced(w->slot, i, 0, 0) & 0xffff;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
	static const long msg = 0x1234;

	switch (w->id) {
	case 0:
		calls(w, 0, k_calls);
		w->acc += traced(w->slot, 100, 1, pipefd[0]) & 0xffff;
		calls(w, k_calls, k_calls);
		break;
	case 1:
		calls(w, 0, k_calls);
		w->acc += traced(w->slot, 100, 2, (long)&word) & 0xffff;
		calls(w, k_calls, k_calls);
		break;
	case 2:
		nanosleep(&ts, NULL);
		calls(w, 0, k_calls);
		__atomic_store_n(&word, 7, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
		break;
	case 3:
		nanosleep(&ts, NULL);
		calls(w, 0, k_calls);
		if (write(pipefd[1], &msg, sizeof(msg)) != sizeof(msg))
			abort();
		break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker w[4];
	pthread_t t[4];
	unsigned long sum = 0;

	if (argc > 1)
		k_calls = atol(argv[1]);
	if (argc > 2)
		delay_ms = atol(argv[2]);
	if (pipe(pipefd))
		return 1;
	for (int i = 0; i < 4; i++) {
		w[i].id = i;
		w[i].slot[0] = i + 1;
		pthread_create(&t[i], NULL, run, &w[i]);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++) {
		printf("thread %d acc %ld slot %ld\n", i, w[i].acc, w[i].slot[0]);
		sum = sum * 1000003 + (unsigned long)w[i].acc;
	}
	printf("checksum %lu\n", sum);
	return 0;
}
