/* Symbols and instructions of the traced binary, from its file (bin.h). */
#include "tdiff/bin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "decode/decode.h"
#include "sym/elfsyms.h"

struct gb_tbin {
	char *path;
	int fd;
	struct gb_elfsyms syms;
};

struct gb_tbin *gb_tbin__open(const char *path, bool required)
{
	struct gb_tbin *b = calloc(1, sizeof(*b));
	if (!b || !(b->path = strdup(path))) {
		gb_err("diff: %s: out of memory", path);
		free(b);
		return NULL;
	}
	b->fd = open(path, O_RDONLY | O_CLOEXEC);
	int e = b->fd < 0 ? -errno : gb_elfsyms_load(path, &b->syms);
	if (e) {
		if (required)
			gb_err("diff: %s: %s", path, e == -ENOEXEC ? "not an ELF file" : strerror(-e));
		else
			gb_warn("diff: %s (the binary the recording names): %s: pcs shown without symbols", path,
				e == -ENOEXEC ? "not an ELF file" : strerror(-e));
		gb_tbin__free(b);
		return NULL;
	}
	return b;
}

bool gb_tbin__symbol(const struct gb_tbin *bin, uint64_t pc, char *buf, size_t len)
{
	uint64_t off;
	const struct gb_elfsym *y = bin ? gb_elfsyms_at(&bin->syms, pc, &off) : NULL;
	if (!y) {
		snprintf(buf, len, "0x%" PRIx64, pc);
		return false;
	}
	if (off)
		snprintf(buf, len, "%s+0x%" PRIx64, y->name, off);
	else
		snprintf(buf, len, "%s", y->name);
	return true;
}

bool gb_tbin__in_ifunc(const struct gb_tbin *bin, uint64_t pc)
{
	uint64_t off;
	const struct gb_elfsym *y = bin ? gb_elfsyms_at(&bin->syms, pc, &off) : NULL;
	return y && y->ifunc;
}

bool gb_tbin__decode(const struct gb_tbin *bin, uint64_t pc, struct gb_insn *in)
{
	uint8_t bytes[GB_INSN_MAX_LEN];
	uint64_t off;
	if (!bin || gb_elfsyms_to_offset(&bin->syms, pc, &off))
		return false;
	ssize_t n = pread(bin->fd, bytes, sizeof(bytes), (off_t)off);
	return n > 0 && !gb_decode(pc, bytes, (size_t)n, in);
}

bool gb_tbin__disasm(const struct gb_tbin *bin, uint64_t pc, char *buf, size_t len, char *mnem, size_t mlen)
{
	struct gb_insn in;
	if (len)
		buf[0] = 0;
	if (mnem && mlen)
		mnem[0] = 0;
	if (!gb_tbin__decode(bin, pc, &in))
		return false;
	gb_insn_format(&in, buf, len);
	if (mnem && mlen)
		snprintf(mnem, mlen, "%s", ZydisMnemonicGetString(in.zi.mnemonic));
	return true;
}

const char *gb_tbin__path(const struct gb_tbin *bin)
{
	return bin->path;
}

void gb_tbin__free(struct gb_tbin *bin)
{
	if (!bin)
		return;
	if (bin->fd >= 0)
		close(bin->fd);
	gb_elfsyms_free(&bin->syms);
	free(bin->path);
	free(bin);
}
