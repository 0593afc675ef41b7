/* gebpf read FILE ADDR LEN [--raw]: bytes of a snapshot's memory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/log.h"
#include "common/parse.h"
#include "snap/snapshot.h"

#define MAX_READ (1ull << 30)

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf read FILE ADDR LEN [--raw]\n"
		   "Print LEN bytes of the snapshot's memory at ADDR (hex) as a hexdump, or\n"
		   "as raw bytes with --raw.  A read may cross maps; a byte outside every\n"
		   "map, or in a map stored without bytes, is an error.\n");
}

static void hexdump(uint64_t addr, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 16) {
		char hex[16 * 3 + 1] = "", asc[17] = "";
		for (size_t j = 0; j < 16; j++) {
			if (i + j < n) {
				snprintf(hex + 3 * j, 4, "%02x ", p[i + j]);
				asc[j] = p[i + j] >= 0x20 && p[i + j] < 0x7f ? (char)p[i + j] : '.';
			} else {
				memcpy(hex + 3 * j, "   ", 4);
				asc[j] = 0;
			}
		}
		printf("0x%016" PRIx64 "  %s |%s|\n", addr + i, hex, asc);
	}
}

int cmd_read(int argc, char **argv)
{
	bool raw;
	int rc = cli_one_flag(argc, argv, "read", "raw", &raw, usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 3) {
		gb_err("read: expected FILE ADDR LEN (see gebpf read --help)");
		return GB_EXIT_USAGE;
	}
	uint64_t addr, len;
	if (gb_parse_hex(argv[optind + 1], &addr)) {
		gb_err("read: ADDR must be a hex address, got '%s'", argv[optind + 1]);
		return GB_EXIT_USAGE;
	}
	if (gb_parse_u64(argv[optind + 2], &len) || len == 0 || len > MAX_READ) {
		gb_err("read: LEN must be a number of bytes from 1 to %llu, got '%s'", MAX_READ, argv[optind + 2]);
		return GB_EXIT_USAGE;
	}
	struct gb_snapshot *s;
	char what[4200];
	snprintf(what, sizeof(what), "read: %s", argv[optind]);
	if (gb_snapshot_load(argv[optind], &s, "read"))
		return GB_EXIT_FAIL;
	int ret = GB_EXIT_FAIL;
	uint8_t *buf = malloc(len);
	if (!buf) {
		gb_err("read: %s: out of memory for %" PRIu64 " bytes", argv[optind], len);
	} else if (!gb_snapshot_read_memory(s, addr, buf, len, what)) {
		if (raw)
			fwrite(buf, 1, len, stdout);
		else
			hexdump(addr, buf, len);
		ret = fflush(stdout) ? GB_EXIT_FAIL : GB_EXIT_OK;
	}
	free(buf);
	gb_snapshot_free(s);
	return ret;
}
