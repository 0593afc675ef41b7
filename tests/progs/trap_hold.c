/* One thread in the range while another runs outside it (issue 23 case 6):
 * main calls `spin_wait`, alone on its own page, which spins until a flag is
 * set; a second thread sleeps 200 ms outside the range and then either sets
 * the flag (mode "flag": main returns, prints "done", exit 0) or calls
 * exit_group(3) with the flag never set (mode "exit").  Under a trap that
 * held the other threads for as long as one is in the range, neither ends.
 * Usage: trap_hold flag|exit.  Range: `spin_wait`. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

/* void spin_wait(volatile int *flag): returns once *flag != 0. */
asm(".pushsection .text.hold,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl spin_wait\n"
    "	.type spin_wait,@function\n"
    "spin_wait:\n"
    "1:	mov (%rdi), %eax\n"
    "	test %eax, %eax\n"
    "	jz 1b\n"
    "	ret\n"
    "	.size spin_wait, .-spin_wait\n"
    "	.balign 4096\n"
    ".popsection\n");
void spin_wait(volatile int *flag);

static volatile int flag;
static int exit_mode;

static void *other(void *arg)
{
	(void)arg;
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	if (exit_mode)
		syscall(SYS_exit_group, 3);
	flag = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	exit_mode = argc > 1 && strcmp(argv[1], "exit") == 0;
	if (pthread_create(&t, NULL, other, NULL))
		return 1;
	spin_wait(&flag);
	pthread_join(t, NULL);
	printf("done\n");
	return 0;
}
