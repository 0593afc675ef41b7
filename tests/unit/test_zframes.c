/* The zstd frame writer (user/record/zframes.c): frames end at line
 * boundaries, each frame decompresses alone to the lines it says it holds,
 * the seek table (parsed here from the bytes, by zstd's documented seekable
 * format) describes the frames, and the whole output decompresses with
 * ZSTD_decompress to exactly the input. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "record/zframes.h"

struct sink {
	char *buf;
	size_t len, cap;
	struct gb_zframe frames[4096]; /* (data points into buf) */
	size_t off[4096];
	size_t nframes, ntables;
	int fail_at;                   /* frame index (1-based) refused, 0 = none */
};

static int emit(void *ctx, const struct gb_zframe *f)
{
	struct sink *s = ctx;
	if (!f->seek_table && s->fail_at && (int)s->nframes + 1 == s->fail_at) {
		s->fail_at = 0;
		return -ENOSPC;
	}
	if (s->len + f->size > s->cap) {
		s->cap = (s->len + f->size) * 2;
		s->buf = realloc(s->buf, s->cap);
		cr_assert(s->buf);
	}
	memcpy(s->buf + s->len, f->data, f->size);
	if (f->seek_table) {
		s->ntables++;
	} else {
		cr_assert_lt(s->nframes, 4096);
		s->off[s->nframes] = s->len;
		s->frames[s->nframes++] = *f;
	}
	s->len += f->size;
	return 0;
}

static uint32_t rd32(const void *p)
{
	const unsigned char *b = p;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Lines of varied lengths (9..~90 bytes), deterministic. */
static char *make_lines(size_t n, size_t *len)
{
	char *s = malloc(n * 100 + 1), *p = s;
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int pad = (int)(x % 60);
		p += sprintf(p, "{\"t\":\"exec\",\"i\":%zu,\"p\":\"%.*s\"}\n", i, pad,
			     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	}
	*len = (size_t)(p - s);
	return s;
}

static size_t count_nl(const char *p, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* The seek table at the end of s: checks its framing and that its entries
 * are the frames emitted, in order, adding up to the file. */
static void check_seek_table(const struct sink *s)
{
	cr_assert_geq(s->len, 17);
	const char *end = s->buf + s->len;
	cr_assert_eq(rd32(end - 4), 0x8F92EAB1u, "seekable magic");
	cr_assert_eq((unsigned char)end[-5], 0, "descriptor: no checksums");
	uint32_t n = rd32(end - 9);
	cr_assert_eq(n, s->nframes);
	size_t table = 8 + (size_t)n * 8 + 9;
	const char *t = end - table;
	cr_assert_eq(rd32(t), 0x184D2A5Eu, "skippable frame magic");
	cr_assert_eq(rd32(t + 4), table - 8, "skippable frame size");
	size_t off = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = rd32(t + 8 + 8 * i), d = rd32(t + 12 + 8 * i);
		cr_assert_eq(off, s->off[i]);
		cr_assert_eq(c, s->frames[i].size);
		cr_assert_eq(d, s->frames[i].in_bytes);
		/* the frame at that offset is c bytes long by zstd's own reading */
		cr_assert_eq(ZSTD_findFrameCompressedSize(s->buf + off, c), c);
		off += c;
	}
	cr_assert_eq(off + table, s->len);
}

/* Writes lines[0..len) in chunks of whole lines of about chunk bytes,
 * every other one with its line count given (gb_zframes__write_n: a
 * frame's count made from the chunk's, checked by the callers against
 * the frames' bytes). */
static void write_chunks(struct gb_zframes *z, const char *lines, size_t len, size_t chunk)
{
	size_t at = 0;
	for (int k = 0; at < len; k++) {
		size_t n = len - at > chunk ? chunk : len - at;
		while (at + n < len && lines[at + n - 1] != '\n')
			n++;
		if (k % 2)
			cr_assert_eq(gb_zframes__write_n(z, lines + at, n, count_nl(lines + at, n)), 0);
		else
			cr_assert_eq(gb_zframes__write(z, lines + at, n), 0);
		at += n;
	}
}

Test(zframes, frames_end_at_lines_and_decompress_alone)
{
	size_t len;
	char *lines = make_lines(20000, &len);
	static struct sink s;
	memset(&s, 0, sizeof(s));
	struct gb_zframes_opts o = { .frame_bytes = 10000 };
	struct gb_zframes *z = gb_zframes__new(&o, emit, &s);
	cr_assert(z);
	write_chunks(z, lines, len, 3333);
	cr_assert_eq(gb_zframes__finish(z), 0);
	cr_assert_eq(s.ntables, 1);
	cr_assert_gt(s.nframes, len / 10100);
	size_t at = 0, nl = 0;
	char *d = malloc(20000);
	for (size_t i = 0; i < s.nframes; i++) {
		const struct gb_zframe *f = &s.frames[i];
		size_t r = ZSTD_decompress(d, 20000, s.buf + s.off[i], f->size);
		cr_assert(!ZSTD_isError(r), "frame %zu: %s", i, ZSTD_getErrorName(r));
		cr_assert_eq(r, f->in_bytes);
		cr_assert_eq(memcmp(d, lines + at, r), 0, "frame %zu", i);
		cr_assert_eq(d[r - 1], '\n', "frame %zu ends at a line end", i);
		cr_assert_eq(f->lines, count_nl(d, r));
		/* ended at the first line end at or past frame_bytes (the last
		 * frame: at finish) */
		if (i + 1 < s.nframes) {
			cr_assert_geq(r, 10000);
			cr_assert_lt(count_nl(d, 10000 - 1), f->lines);
			cr_assert_eq(count_nl(d + 9999, r - 9999), 1);
		}
		at += r;
		nl += f->lines;
	}
	cr_assert_eq(at, len);
	cr_assert_eq(nl, 20000);
	check_seek_table(&s);
	struct gb_zframes_totals t;
	gb_zframes__totals(z, &t);
	cr_assert_eq(t.frames, s.nframes);
	cr_assert_eq(t.in_bytes, len);
	cr_assert_eq(t.lines, 20000);
	cr_assert_eq(t.out_bytes + 8 + 8 * s.nframes + 9, s.len);
	free(d);
	free(lines);
	free(s.buf);
	gb_zframes__free(z);
}

/* The file as a whole (frames + seek table) decompresses with
 * ZSTD_decompress to the input byte for byte, at levels 1..3, with and
 * without workers. */
Test(zframes, whole_output_byte_identical)
{
	size_t len;
	char *lines = make_lines(200000, &len);
	char *d = malloc(len + 1);
	int workers[] = { 0, 2 };
	for (int level = 1; level <= 3; level++)
		for (int w = 0; w < 2; w++) {
			static struct sink s;
			memset(&s, 0, sizeof(s));
			struct gb_zframes_opts o = { .level = level, .frame_bytes = 1 << 20,
						     .workers = workers[w] };
			struct gb_zframes *z = gb_zframes__new(&o, emit, &s);
			cr_assert(z);
			write_chunks(z, lines, len, 65536);
			cr_assert_eq(gb_zframes__finish(z), 0);
			check_seek_table(&s);
			size_t r = ZSTD_decompress(d, len + 1, s.buf, s.len);
			cr_assert(!ZSTD_isError(r), "%s", ZSTD_getErrorName(r));
			cr_assert_eq(r, len);
			cr_assert_eq(memcmp(d, lines, len), 0);
			cr_assert_lt(s.len * 5, len, "level %d: compressed %zu of %zu", level, s.len,
				     len);
			free(s.buf);
			gb_zframes__free(z);
		}
	free(d);
	free(lines);
}

/* end_frame: a frame of what is pending, nothing when nothing is; a single
 * line longer than frame_bytes is one frame. */
Test(zframes, end_frame_and_long_line)
{
	static struct sink s;
	memset(&s, 0, sizeof(s));
	struct gb_zframes_opts o = { .frame_bytes = 16 };
	struct gb_zframes *z = gb_zframes__new(&o, emit, &s);
	cr_assert_eq(gb_zframes__end_frame(z), 0);
	cr_assert_eq(s.nframes, 0);
	cr_assert_eq(gb_zframes__write(z, "a\n", 2), 0);
	cr_assert_eq(gb_zframes__pending(z), 2);
	cr_assert_eq(gb_zframes__end_frame(z), 0);
	cr_assert_eq(gb_zframes__pending(z), 0);
	cr_assert_eq(s.nframes, 1);
	cr_assert_eq(s.frames[0].lines, 1);
	const char *longl = "0123456789012345678901234567890123456789\nb\n";
	cr_assert_eq(gb_zframes__write(z, longl, strlen(longl)), 0);
	cr_assert_eq(s.nframes, 2, "the long line ends its frame");
	cr_assert_eq(s.frames[1].in_bytes, 41);
	cr_assert_eq(gb_zframes__finish(z), 0);
	cr_assert_eq(s.nframes, 3);
	cr_assert_eq(s.frames[2].in_bytes, 2);
	check_seek_table(&s);
	char d[64];
	size_t r = ZSTD_decompress(d, sizeof(d), s.buf, s.len);
	cr_assert_eq(r, 2 + strlen(longl));
	cr_assert_eq(memcmp(d, "a\n", 2), 0);
	cr_assert_eq(memcmp(d + 2, longl, strlen(longl)), 0);
	free(s.buf);
	gb_zframes__free(z);
}

/* A frame emit() refuses is not in the seek table, its error is returned,
 * later frames go on; drop_last takes the last entry back out. */
Test(zframes, refused_and_dropped_frames_leave_the_table)
{
	static struct sink s;
	memset(&s, 0, sizeof(s));
	s.fail_at = 2;
	struct gb_zframes_opts o = { .frame_bytes = 4 };
	struct gb_zframes *z = gb_zframes__new(&o, emit, &s);
	cr_assert_eq(gb_zframes__write(z, "one\n", 4), 0);
	cr_assert_eq(gb_zframes__write(z, "two\n", 4), -ENOSPC);
	cr_assert_eq(gb_zframes__write(z, "three\nfour\n", 11), 0);
	cr_assert_eq(s.nframes, 3);
	struct gb_zframe f;
	cr_assert_eq(gb_zframes__drop_last(z, &f), 0);
	cr_assert_eq(f.lines, 1);
	cr_assert_eq(f.in_bytes, 5);
	cr_assert_eq(f.size, s.frames[2].size);
	s.len = s.off[2];
	s.nframes = 2;
	cr_assert_eq(gb_zframes__finish(z), 0);
	check_seek_table(&s);
	char d[64];
	size_t r = ZSTD_decompress(d, sizeof(d), s.buf, s.len);
	cr_assert_eq(r, 10);
	cr_assert_eq(memcmp(d, "one\nthree\n", 10), 0);
	free(s.buf);
	gb_zframes__free(z);
}

/* Every prefix of the output ending at a frame's end decompresses (a
 * killed writer); a prefix cut inside a frame gives its whole frames
 * through a streaming decoder, then an incomplete frame. */
Test(zframes, truncated_output_reads_to_last_frame)
{
	size_t len;
	char *lines = make_lines(5000, &len);
	static struct sink s;
	memset(&s, 0, sizeof(s));
	struct gb_zframes_opts o = { .frame_bytes = 20000 };
	struct gb_zframes *z = gb_zframes__new(&o, emit, &s);
	write_chunks(z, lines, len, 7000);
	cr_assert_eq(gb_zframes__finish(z), 0);
	cr_assert_geq(s.nframes, 3);
	size_t cut = s.off[2] + s.frames[2].size / 2, want = s.frames[0].in_bytes + s.frames[1].in_bytes;
	ZSTD_DStream *ds = ZSTD_createDStream();
	char *d = malloc(len);
	ZSTD_inBuffer ib = { s.buf, cut, 0 };
	ZSTD_outBuffer ob = { d, len, 0 };
	size_t r = 1;
	while (ib.pos < ib.size && !ZSTD_isError(r))
		r = ZSTD_decompressStream(ds, &ob, &ib);
	cr_assert(!ZSTD_isError(r));
	cr_assert_neq(r, 0, "the cut frame is incomplete");
	cr_assert_geq(ob.pos, want);
	cr_assert_eq(memcmp(d, lines, want), 0);
	r = ZSTD_decompress(d, len, s.buf, s.off[2]);
	cr_assert_eq(r, want);
	ZSTD_freeDStream(ds);
	free(d);
	free(lines);
	free(s.buf);
	gb_zframes__free(z);
}
