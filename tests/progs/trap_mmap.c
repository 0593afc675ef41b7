/* Memory the program maps AFTER it has entered and left the range, then
 * touches from the range: an anonymous page (mmap), a large malloc (its own
 * mmap) and a new thread's stack.  A tracer that maps pages of its own into
 * the target (a trampoline, a scratch page) where the program's next mmap
 * would land moves all of these, and the trace's addresses with them.
 * `traced` sits alone on its page (section .text.trap_mmap).
 * Usage: trap_mmap.  Prints a checksum (no addresses); exit 0.
 * Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

long traced(long *p, long i);

asm(".pushsection .text.trap_mmap,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl traced\n"
    "	.type traced,@function\n"
    "traced:\n"
    "	mov (%rdi), %rax\n"
    "	add %rsi, %rax\n"
    "	mov %rax, (%rdi)\n"
    "	ret\n"
    "	.size traced, .-traced\n"
    "	.balign 4096\n"
    ".popsection\n");

static long on_stack(void)
{
	long local[4] = {1, 2, 3, 4};
	return traced(&local[2], 5);
}

static void *thread(void *arg)
{
	*(long *)arg = on_stack();
	return NULL;
}

int main(void)
{
	static long data[1] = {7};
	long sum = traced(data, 1);        /* enter and leave the range first */
	long *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long *big = malloc(1 << 20);
	pthread_t t;
	long from_thread = 0;

	if (page == MAP_FAILED || !big)
		return 1;
	page[3] = 10;
	big[100] = 20;
	sum += traced(&page[3], 2);
	sum += traced(&big[100], 3);
	sum += on_stack();
	if (pthread_create(&t, NULL, thread, &from_thread) || pthread_join(t, NULL))
		return 1;
	printf("sum %ld thread %ld\n", sum, from_thread);
	return 0;
}
