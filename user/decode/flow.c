/* gb_flow_decode(): Zydis's minimal mode (no operands, no semantic
 * analysis) still yields the length, the mnemonic and the raw relative
 * immediate, which is all control flow needs. */
#include "decode/flow.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <Zydis/Zydis.h>

static ZydisDecoder flow_dec;
static pthread_once_t flow_once = PTHREAD_ONCE_INIT;

static void flow_init(void)
{
	ZydisDecoderInit(&flow_dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderEnableMode(&flow_dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
}

int gb_flow_decode(uint64_t pc, const uint8_t *bytes, size_t n, struct gb_flow *out)
{
	ZydisDecodedInstruction zi;

	pthread_once(&flow_once, flow_init);
	memset(out, 0, sizeof(*out));
	if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&flow_dec, NULL, bytes, n, &zi)))
		return -EINVAL;
	out->len = zi.length;
	out->call = zi.mnemonic == ZYDIS_MNEMONIC_CALL;
	/* Relative immediates belong to jmp/jcc/call/loop/jrcxz/jecxz and
	 * xbegin (whose target is the abort handler: an entry too). */
	if (zi.raw.imm[0].is_relative) {
		out->direct = true;
		out->target = pc + zi.length + (uint64_t)zi.raw.imm[0].value.s;
	}
	return 0;
}

int gb_flow_boundary(uint64_t va, const uint8_t *p, size_t n, uint64_t addr, uint64_t *prev,
		     uint64_t *next)
{
	uint64_t pc = va;
	while (pc < addr) {
		struct gb_flow f;
		*prev = pc;
		if (gb_flow_decode(pc, p + (pc - va), n - (pc - va), &f))
			return -EINVAL;
		pc += f.len;
	}
	*next = pc;
	if (pc == addr)
		*prev = addr;
	return pc == addr ? 0 : 1;
}

static int32_t rd32(const uint8_t *b)
{
	int32_t v;
	memcpy(&v, b, 4);
	return v;
}

int gb_flow_scan(uint64_t va, const uint8_t *p, size_t n, uint64_t lo, uint64_t hi,
		 int (*cb)(void *ctx, uint64_t src, uint64_t target), void *ctx)
{
	int r;
	/* rel32 forms: anywhere in the code. */
	for (size_t i = 0; i + 5 <= n; i++) {
		uint8_t op = p[i];
		size_t end;
		if (op == 0xe8 || op == 0xe9)
			end = i + 5;
		else if (i + 6 <= n && ((op == 0x0f && (p[i + 1] & 0xf0) == 0x80) ||
					(op == 0xc7 && p[i + 1] == 0xf8)))
			end = i + 6;
		else
			continue;
		uint64_t t = va + end + (uint64_t)(int64_t)rd32(p + end - 4);
		if (t >= lo && t <= hi && (r = cb(ctx, va + i, t)))
			return r;
	}
	/* rel8 forms: only within reach of the range. */
	uint64_t from = lo > va + 130 ? lo - 130 : va, to = hi + 130;
	for (uint64_t a = from; a < to && a - va + 2 <= n; a++) {
		size_t i = a - va;
		uint8_t op = p[i];
		if (op != 0xeb && (op & 0xf0) != 0x70 && (op < 0xe0 || op > 0xe3))
			continue;
		uint64_t t = a + 2 + (uint64_t)(int64_t)(int8_t)p[i + 1];
		if (t >= lo && t <= hi && (r = cb(ctx, a, t)))
			return r;
	}
	return 0;
}
