/* A trace from a path, `-`, a pipe or a recording directory, read once and
 * sniffed from its first bytes (treader.h). */
#include "record/treader.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zstd.h>

#include "common/log.h"

#define RAW_CAP (256u << 10)
#define TEXT_MIN (1u << 20)
#define SKIPPABLE_MASK 0xFFFFFFF0u
#define SKIPPABLE_MAGIC 0x184D2A50u

enum zstate { Z_BETWEEN, Z_FRAME, Z_SKIP };

struct gb_treader {
	char *name, *path, *binary, *maps;
	const char *who;
	int fd;
	bool is_reg, keep;
	enum gb_tformat fmt;
	/* Input bytes (compressed for zstd). */
	uint8_t *raw;
	size_t raw_len, raw_pos;
	bool raw_eof;
	/* Everything read, for a rewind of a pipe. */
	uint8_t *kept;
	size_t kept_len, kept_cap, kept_pos;
	bool replay;
	ZSTD_DStream *z;
	enum zstate zs;
	uint64_t skip_left;
	/* Plain text, lines cut from it in place. */
	char *buf;
	size_t buf_len, buf_pos, buf_cap;
	bool text_eof, warned;
	long lineno;
	struct gb_treader_stats st;
};

static ssize_t read_src(struct gb_treader *r, uint8_t *dst, size_t n)
{
	if (r->replay && r->kept_pos < r->kept_len) {
		size_t k = r->kept_len - r->kept_pos < n ? r->kept_len - r->kept_pos : n;
		memcpy(dst, r->kept + r->kept_pos, k);
		r->kept_pos += k;
		return (ssize_t)k;
	}
	ssize_t got;
	do
		got = read(r->fd, dst, n);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return gb_fail(-errno, "%s: %s: %s", r->who, r->name, strerror(errno));
	if (got > 0 && r->keep) {
		if (r->kept_len + (size_t)got > r->kept_cap) {
			size_t cap = r->kept_cap ? r->kept_cap : RAW_CAP;
			while (cap < r->kept_len + (size_t)got)
				cap *= 2;
			uint8_t *k = realloc(r->kept, cap);
			if (!k)
				return gb_fail(-ENOMEM, "%s: %s: out of memory keeping a pipe's input (%zu MB)",
					       r->who, r->name, cap >> 20);
			r->kept = k;
			r->kept_cap = cap;
		}
		memcpy(r->kept + r->kept_len, dst, (size_t)got);
		r->kept_len += (size_t)got;
		r->kept_pos = r->kept_len;
	}
	r->st.raw_bytes += (uint64_t)got;
	return got;
}

/* More input bytes after the unconsumed ones: >0, 0 at the end, -errno. */
static ssize_t fill_raw(struct gb_treader *r)
{
	if (r->raw_eof)
		return 0;
	if (r->raw_pos) {
		memmove(r->raw, r->raw + r->raw_pos, r->raw_len - r->raw_pos);
		r->raw_len -= r->raw_pos;
		r->raw_pos = 0;
	}
	ssize_t got = read_src(r, r->raw + r->raw_len, RAW_CAP - r->raw_len);
	if (got == 0)
		r->raw_eof = true;
	if (got > 0)
		r->raw_len += (size_t)got;
	return got;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Decompress into buf[buf_len..buf_cap): >0 bytes added, 0 at the end,
 * -errno. */
static ssize_t fill_zstd(struct gb_treader *r)
{
	for (;;) {
		size_t avail = r->raw_len - r->raw_pos;
		size_t want = r->zs == Z_BETWEEN ? 8 : 1;
		if (avail < want && !r->raw_eof) {
			ssize_t got = fill_raw(r);
			if (got < 0)
				return got;
			continue;
		}
		if (!avail) {
			r->st.truncated = r->zs != Z_BETWEEN;
			return 0;
		}
		const uint8_t *p = r->raw + r->raw_pos;
		if (r->zs == Z_BETWEEN) {
			uint32_t m = avail >= 4 ? le32(p) : 0;
			if (m == ZSTD_MAGICNUMBER) {
				r->st.frames++;
				r->zs = Z_FRAME;
			} else if ((m & SKIPPABLE_MASK) == SKIPPABLE_MAGIC && avail >= 8) {
				r->st.skippable++;
				r->skip_left = 8 + (uint64_t)le32(p + 4);
				r->zs = Z_SKIP;
			} else if (avail < 8 && r->raw_eof && (avail < 4 || m == ZSTD_MAGICNUMBER ||
							       (m & SKIPPABLE_MASK) == SKIPPABLE_MAGIC)) {
				r->st.truncated = true;   /* a frame header cut short */
				r->raw_pos = r->raw_len;
				return 0;
			} else {
				return gb_fail(-EINVAL, "%s: %s: not a zstd frame at compressed byte %llu", r->who,
					       r->name,
					       (unsigned long long)(r->st.raw_bytes - (r->raw_len - r->raw_pos)));
			}
			continue;
		}
		if (r->zs == Z_SKIP) {
			size_t k = avail < r->skip_left ? avail : (size_t)r->skip_left;
			r->raw_pos += k;
			r->skip_left -= k;
			if (!r->skip_left)
				r->zs = Z_BETWEEN;
			continue;
		}
		ZSTD_inBuffer in = { r->raw, r->raw_len, r->raw_pos };
		ZSTD_outBuffer out = { r->buf + r->buf_len, r->buf_cap - r->buf_len, 0 };
		size_t ret = ZSTD_decompressStream(r->z, &out, &in);
		if (ZSTD_isError(ret))
			return gb_fail(-EINVAL, "%s: %s: zstd: %s", r->who, r->name, ZSTD_getErrorName(ret));
		r->raw_pos = in.pos;
		r->buf_len += out.pos;
		if (ret == 0)
			r->zs = Z_BETWEEN;
		if (out.pos)
			return (ssize_t)out.pos;
		if (in.pos == in.size && r->raw_eof) {
			r->st.truncated = true;
			return 0;
		}
	}
}

/* More text in buf: >0, 0 at the end, -errno. */
static ssize_t fill_text(struct gb_treader *r)
{
	if (r->buf_pos) {
		memmove(r->buf, r->buf + r->buf_pos, r->buf_len - r->buf_pos);
		r->buf_len -= r->buf_pos;
		r->buf_pos = 0;
	}
	if (r->buf_cap - r->buf_len < TEXT_MIN / 4) {
		size_t cap = r->buf_cap ? r->buf_cap * 2 : TEXT_MIN;
		char *b = realloc(r->buf, cap);
		if (!b)
			return gb_fail(-ENOMEM, "%s: %s: out of memory (a line of %zu MB)", r->who, r->name,
				       r->buf_len >> 20);
		r->buf = b;
		r->buf_cap = cap;
	}
	if (r->fmt == GB_TFORMAT_ZSTD)
		return fill_zstd(r);
	if (r->raw_pos < r->raw_len) {   /* the sniffed bytes first */
		size_t k = r->raw_len - r->raw_pos;
		k = k < r->buf_cap - r->buf_len ? k : r->buf_cap - r->buf_len;
		memcpy(r->buf + r->buf_len, r->raw + r->raw_pos, k);
		r->raw_pos += k;
		r->buf_len += k;
		return (ssize_t)k;
	}
	ssize_t got = read_src(r, (uint8_t *)r->buf + r->buf_len, r->buf_cap - r->buf_len - 1);
	if (got > 0)
		r->buf_len += (size_t)got;
	return got;
}

int gb_treader__next(struct gb_treader *r, const char **line, size_t *len)
{
	for (;;) {
		char *s = r->buf + r->buf_pos;
		size_t n = r->buf_len - r->buf_pos;
		char *nl = n ? memchr(s, '\n', n) : NULL;
		if (!nl && r->text_eof && n) {
			if (r->st.truncated) {   /* the cut line of a killed trace */
				r->buf_pos = r->buf_len;
				continue;
			}
			if (r->buf_len == r->buf_cap && fill_text(r) < 0)   /* room for the NUL */
				return -ENOMEM;
			s = r->buf + r->buf_pos;
			nl = s + n;
		}
		if (nl) {
			size_t l = (size_t)(nl - s);
			bool term = nl < r->buf + r->buf_len;
			r->buf_pos += l + term;
			r->st.bytes += l + term;
			r->lineno++;
			while (l && s[l - 1] == '\r')
				l--;
			if (!l)
				continue;
			s[l] = 0;
			*line = s;
			*len = l;
			return 1;
		}
		if (r->text_eof) {
			if (r->st.truncated && !r->warned)
				gb_warn("%s: %s: the last zstd frame is cut short (a killed trace?): read the %ld "
					"complete lines before the cut", r->who, r->name, r->lineno);
			r->warned = true;
			return 0;
		}
		ssize_t got = fill_text(r);
		if (got < 0)
			return (int)got;
		if (!got)
			r->text_eof = true;
	}
}

static char *slurp(const char *path, size_t max)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *s = calloc(1, max + 1);
	size_t n = s ? fread(s, 1, max, f) : 0;
	fclose(f);
	if (s)
		s[n] = 0;
	return s;
}

/* A recording directory: its meta.json says where the trace is. */
static int open_recording(struct gb_treader *r, const char *dir)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/meta.json", dir);
	char *text = slurp(p, 16u << 20);
	if (!text)
		return gb_fail(-errno ? -errno : -ENOMEM, "%s: %s: a directory without a readable meta.json: "
			       "%s", r->who, dir, strerror(errno ? errno : ENOMEM));
	cJSON *m = cJSON_Parse(text);
	free(text);
	if (!m)
		return gb_fail(-EINVAL, "%s: %s: not JSON", r->who, p);
	const char *blob = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "trace_blob"));
	const char *exe = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "exe"));
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(m, "command");
	if (!exe && cJSON_IsArray(cmd))
		exe = cJSON_GetStringValue(cJSON_GetArrayItem(cmd, 0));
	if (exe) {
		char q[4096], d[4096];
		snprintf(d, sizeof(d), "%s", dir);
		snprintf(q, sizeof(q), "%s/%s", dirname(d), exe);
		r->binary = strdup(exe[0] != '/' && access(exe, R_OK) && !access(q, R_OK) ? q : exe);
	}
	const cJSON *maps = cJSON_GetObjectItemCaseSensitive(m, "maps");
	if (cJSON_IsString(maps)) {
		r->maps = strdup(maps->valuestring);
	} else if (cJSON_IsArray(maps)) {
		size_t n = 1;
		const cJSON *l;
		cJSON_ArrayForEach(l, maps) if (cJSON_IsString(l)) n += strlen(l->valuestring) + 1;
		if ((r->maps = calloc(1, n)))
			cJSON_ArrayForEach(l, maps) if (cJSON_IsString(l)) {
				strcat(r->maps, l->valuestring);
				strcat(r->maps, "\n");
			}
	}
	if (!blob) {
		cJSON_Delete(m);
		return gb_fail(-EINVAL, "%s: %s: no \"trace_blob\" (a recording made without a trace?)", r->who, p);
	}
	snprintf(p, sizeof(p), "%s/%s", dir, blob);
	cJSON_Delete(m);
	if (!(r->name = strdup(p)) || !(r->path = strdup(p)))
		return -ENOMEM;
	r->fd = open(p, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return gb_fail(-errno, "%s: %s: %s", r->who, p, strerror(errno));
	return 0;
}

static int reset(struct gb_treader *r)
{
	if (r->z && ZSTD_isError(ZSTD_DCtx_reset(r->z, ZSTD_reset_session_only)))
		return -EINVAL;
	r->raw_len = r->raw_pos = r->buf_len = r->buf_pos = 0;
	r->raw_eof = r->text_eof = false;   /* warned stays: one warning per input */
	r->zs = Z_BETWEEN;
	r->lineno = 0;
	memset(&r->st, 0, sizeof(r->st));
	return 0;
}

int gb_treader__open(const char *path, unsigned flags, const char *who, struct gb_treader **out)
{
	struct gb_treader *r = calloc(1, sizeof(*r));
	int err = -ENOMEM;
	*out = NULL;
	if (!r || !(r->raw = malloc(RAW_CAP)))
		goto fail;
	r->who = who;
	r->fd = -1;
	struct stat sb;
	if (!strcmp(path, "-")) {
		r->fd = STDIN_FILENO;
		if (!(r->name = strdup("(stdin)")))
			goto fail;
	} else if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
		if ((err = open_recording(r, path)))
			goto fail;
	} else {
		if (!(r->name = strdup(path)) || !(r->path = strdup(path)))
			goto fail;
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (r->fd < 0) {
			err = gb_fail(-errno, "%s: %s: %s", who, path, strerror(errno));
			goto fail;
		}
	}
	if (fstat(r->fd, &sb)) {
		err = gb_fail(-errno, "%s: %s: %s", who, r->name, strerror(errno));
		goto fail;
	}
	if (S_ISDIR(sb.st_mode)) {
		err = gb_fail(-EISDIR, "%s: %s: %s", who, r->name, strerror(EISDIR));
		goto fail;
	}
	r->is_reg = S_ISREG(sb.st_mode);
	r->keep = (flags & GB_TREADER_REWIND) && !r->is_reg;
	while (r->raw_len < 4 && !r->raw_eof) {
		ssize_t got = fill_raw(r);
		if (got < 0) {
			err = (int)got;
			goto fail;
		}
	}
	if (r->raw_len >= 4 && !memcmp(r->raw, "\177ELF", 4)) {
		r->fmt = GB_TFORMAT_ELF;
	} else if (r->raw_len >= 4 && le32(r->raw) == ZSTD_MAGICNUMBER) {
		r->fmt = GB_TFORMAT_ZSTD;
		if (!(r->z = ZSTD_createDStream()))
			goto fail;
	}
	*out = r;
	return 0;
fail:
	if (err == -ENOMEM)
		gb_err("%s: %s: out of memory", who, path);
	gb_treader__free(r);
	return err;
}

int gb_treader__rewind(struct gb_treader *r)
{
	if (r->is_reg) {
		if (lseek(r->fd, 0, SEEK_SET) < 0)
			return gb_fail(-errno, "%s: %s: %s", r->who, r->name, strerror(errno));
	} else if (r->keep) {
		r->replay = true;
		r->kept_pos = 0;
	} else {
		return gb_fail(-ESPIPE, "%s: %s: cannot read a pipe twice", r->who, r->name);
	}
	return reset(r);
}

enum gb_tformat gb_treader__format(const struct gb_treader *r) { return r->fmt; }
const char *gb_treader__name(const struct gb_treader *r) { return r->name; }
bool gb_treader__reopenable(const struct gb_treader *r) { return r->is_reg && r->path; }
long gb_treader__lineno(const struct gb_treader *r) { return r->lineno; }
const char *gb_treader__binary(const struct gb_treader *r) { return r->binary; }
const char *gb_treader__maps(const struct gb_treader *r) { return r->maps; }

void gb_treader__stats(const struct gb_treader *r, struct gb_treader_stats *st)
{
	*st = r->st;
}

void gb_treader__free(struct gb_treader *r)
{
	if (!r)
		return;
	if (r->fd > STDIN_FILENO)
		close(r->fd);
	ZSTD_freeDStream(r->z);
	free(r->raw);
	free(r->kept);
	free(r->buf);
	free(r->name);
	free(r->path);
	free(r->binary);
	free(r->maps);
	free(r);
}
