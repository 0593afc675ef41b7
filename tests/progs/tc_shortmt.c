/* tc_short's range entered by threads at once: `traced` begins with two
 * 2-byte instructions and `ts_in2` (+2), `ts_in4` (+4) are jump targets
 * from outside, so under the patch trap `traced` and `ts_in2` keep uprobes
 * (ts_in4 is patched): THREADS threads (default 8) released together each
 * call all three N times (default 50), so probed entries meet stretches of
 * other threads holding the cache's lock.  Assembly in C (the exact bytes
 * matter).  Usage: tc_shortmt [N [THREADS]].  Prints each thread's
 * checksum (in thread order); exit 0 (2 on a bad THREADS).  Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXTHREADS 16

long traced(long x), via_in2(long x), via_in4(long x);

__asm__(".text\n"
	".globl traced\n.type traced,@function\n"
	"traced:\n"
	"	xor %eax, %eax\n"          /* 31 c0 */
	".globl mt_in2\nmt_in2:\n"
	"	add %edi, %eax\n"          /* 01 f8 */
	".globl mt_in4\nmt_in4:\n"
	"	lea 1(%rax,%rax,2), %rax\n"
	"	xor $0x5a, %rax\n"
	"	ret\n"
	".size traced,.-traced\n"
	".globl via_in2\n.type via_in2,@function\n"
	"via_in2:\n"
	"	mov $7, %eax\n"
	"	jmp mt_in2\n"
	".size via_in2,.-via_in2\n"
	".globl via_in4\n.type via_in4,@function\n"
	"via_in4:\n"
	"	lea 3(%rdi), %rax\n"
	"	jmp mt_in4\n"
	".size via_in4,.-via_in4\n");

static pthread_barrier_t start;
static long n = 50;
static unsigned long result[MAXTHREADS];

static void *worker(void *arg)
{
	long id = (long)arg;
	unsigned long sum = (unsigned long)id;
	pthread_barrier_wait(&start);
	for (long i = 0; i < n; i++)
		sum = sum * 7 + (unsigned long)(traced(i + id) + via_in2(i) * 3 + via_in4(id) * 5);
	result[id] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[MAXTHREADS];
	int nthreads = argc > 2 ? atoi(argv[2]) : 8;
	if (argc > 1)
		n = atol(argv[1]);
	if (nthreads < 1 || nthreads > MAXTHREADS)
		return 2;
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (long k = 0; k < nthreads; k++)
		pthread_create(&t[k], NULL, worker, (void *)k);
	for (int k = 0; k < nthreads; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < nthreads; k++)
		printf("thread %d checksum %lx\n", k, result[k]);
	return 0;
}
