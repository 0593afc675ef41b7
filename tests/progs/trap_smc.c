/* trap_smc: self-modifying code under the page trap.  `jit` is a page of
 * its own, writable and executable; main rewrites its first instruction
 * natively between calls, alternating a 4-byte load and a 4-byte store at
 * the same pc, so a decode cached at one entry is wrong at the next unless
 * it is re-checked.  Range: `jit`.  Prints the sum of what it loaded. */
#include <stdio.h>
#include <string.h>

__attribute__((section(".jit,\"awx\",@progbits#"), aligned(4096))) unsigned char jit[4096] = { 0xc3 };

int main(void)
{
	long (*f)(void) = (long (*)(void))jit;
	long s = 0;
	/* mov eax, [rip+0x7fa] / mov [rip+0x7fa], eax: jit+0x800 either way. */
	static const unsigned char load[] = { 0x8b, 0x05, 0xfa, 0x07, 0x00, 0x00, 0xc3 };
	static const unsigned char store[] = { 0x89, 0x05, 0xfa, 0x07, 0x00, 0x00, 0xc3 };
	for (int i = 0; i < 6; i++) {
		memcpy(jit, (i & 1) ? store : load, sizeof(load));
		jit[0x800] = (unsigned char)(i + 1);
		s += f() & 0xff;
	}
	printf("%ld\n", s);
	return 0;
}
