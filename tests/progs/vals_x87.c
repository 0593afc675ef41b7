/* What `trace --values` must show, as the program knows it: `traced` loads
 * 0.5 and takes its sine on the x87 stack (80 bits, stored with fstpt),
 * the square root of 2.0 in SSE, and a 64-bit product, and stores each.
 * main prints each stored value as the trace writes values (its bytes as
 * one little-endian integer, hex).  QEMU computes fsin at double precision
 * (docs/qemu.md): its sine differs in the last bits, the rest does not. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct result {
	unsigned char sine[16];  /* the 80-bit extended value, padded */
	double root;
	uint64_t product;
} out;
double in_x = 0.5, in_q = 2.0;
uint64_t in_a = 0x123456789, in_b = 0xabcdef;

void traced(void);
__asm__(".globl traced\n"
	".type traced, @function\n"
	"traced:\n"
	"	fldl in_x(%rip)\n"
	"	fsin\n"
	"	fstpt out(%rip)\n"
	"	movsd in_q(%rip), %xmm0\n"
	"	sqrtsd %xmm0, %xmm0\n"
	"	movsd %xmm0, out+16(%rip)\n"
	"	mov in_a(%rip), %rax\n"
	"	imul in_b(%rip), %rax\n"
	"	mov %rax, out+24(%rip)\n"
	"	ret\n"
	".size traced, .-traced\n");

/* bytes as one little-endian integer: "0x" and no leading zeros. */
static void put(const char *name, const void *p, size_t n)
{
	const unsigned char *b = p;
	while (n > 1 && !b[n - 1])
		n--;
	printf("%s 0x%x", name, b[n - 1]);
	while (n-- > 1)
		printf("%02x", b[n - 1]);
	printf("\n");
}

int main(void)
{
	traced();
	put("sine", out.sine, 10);
	put("root", &out.root, 8);
	put("product", &out.product, 8);
	put("x", &in_x, 8);
	return 0;
}
