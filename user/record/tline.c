/* Trace lines read back: a hand parser for the writer's flat shape, cJSON
 * for anything else (tline.h). */
#include "record/tline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

const char *const gb_tline_names[GB_TL_NTYPES] = { "other", "exec", "read", "write", "fault", "summary",
						    "regs" };

static uint8_t type_of(const char *s, size_t n)
{
	for (int t = GB_TL_EXEC; t < GB_TL_NTYPES; t++)
		if (strlen(gb_tline_names[t]) == n && !memcmp(gb_tline_names[t], s, n))
			return (uint8_t)t;
	return GB_TL_OTHER;
}

static uint64_t hex(const char *s, size_t n)
{
	uint64_t v = 0;
	size_t i = n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 2 : 0;
	for (; i < n; i++) {
		char c = s[i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') :
			     c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) :
			     c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
		if (d == 16)
			break;
		v = v << 4 | d;
	}
	return v;
}

static void set_str(struct gb_tline *o, const char *k, size_t kn, const char *v, size_t vn, bool *has_t)
{
	if (kn == 1 && k[0] == 't') {
		o->type = type_of(v, vn);
		*has_t = true;
	} else if (kn == 4 && !memcmp(k, "addr", 4)) {
		o->addr = hex(v, vn);
	} else if (kn == 2 && !memcmp(k, "pc", 2)) {
		o->pc = hex(v, vn);
	} else if (kn == 3 && !memcmp(k, "err", 3)) {
		o->err = hex(v, vn);
		o->has_err = true;
	} else if (kn == 3 && !memcmp(k, "val", 3)) {
		o->val = v;
		o->val_len = (uint32_t)vn;
	}
}

static void set_num(struct gb_tline *o, const char *k, size_t kn, int64_t v)
{
	if (kn == 4 && !memcmp(k, "vcpu", 4))
		o->vcpu = v;
	else if (kn == 4 && !memcmp(k, "size", 4))
		o->size = v;
	else if (kn == 2 && !memcmp(k, "vt", 2))
		o->vt = v;
	else if (kn == 3 && !memcmp(k, "err", 3))
		o->has_err = true;   /* a number: present, not hex */
}

static int general(const char *s, size_t len, struct gb_tline *o);

static int slow(const char *s, size_t len, struct gb_tline *o)
{
	cJSON *j = cJSON_ParseWithLength(s, len);
	const char *t = j ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "t")) : NULL;
	if (!t) {
		cJSON_Delete(j);
		return -EINVAL;
	}
	bool has_t = false;
	memset(o, 0, sizeof(*o));
	o->vcpu = o->size = o->vt = -1;
	const cJSON *it;
	cJSON_ArrayForEach(it, j) {
		size_t kn = strlen(it->string);
		if (cJSON_IsString(it))
			set_str(o, it->string, kn, it->valuestring, strlen(it->valuestring), &has_t);
		else if (cJSON_IsNumber(it))
			set_num(o, it->string, kn, (int64_t)it->valuedouble);
		else if (kn == 3 && !strcmp(it->string, "err"))
			o->has_err = true;
	}
	cJSON_Delete(j);
	o->val = o->regs = NULL; /* (they pointed into cJSON's copy) */
	o->val_len = o->regs_len = 0;
	return 0;
}

/* The writer's own shape (docs/trace-format.md "Lines"), field by field:
 * most lines are read here.  false: some other shape (the general parser
 * then reads it). */
static bool lit(const char **p, const char *e, const char *w, size_t n)
{
	if ((size_t)(e - *p) < n || memcmp(*p, w, n))
		return false;
	*p += n;
	return true;
}

static bool dec(const char **p, const char *e, int64_t *v)
{
	const char *d = *p;
	int64_t x = 0;
	while (*p < e && **p >= '0' && **p <= '9' && *p - d < 18)
		x = x * 10 + (*(*p)++ - '0');
	*v = x;
	return *p > d && *p < e && **p != '.' && **p != 'e' && **p != 'E' && !(**p >= '0' && **p <= '9');
}

static bool hexq(const char **p, const char *e, uint64_t *v)
{
	if (!lit(p, e, "\"0x", 3))
		return false;
	uint64_t x = 0;
	const char *d = *p;
	for (; *p < e && *p - d < 16; (*p)++) {
		char c = **p;
		unsigned k = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
		if (k == 16)
			break;
		x = x << 4 | k;
	}
	*v = x;
	return *p > d && lit(p, e, "\"", 1);
}

/* A flat object ({"k":"v",...}, no nesting, no escapes) at *p: its start,
 * *p past it; NULL when it is not one. */
static const char *flat_object(const char **p, const char *e)
{
	const char *s = *p, *q = s;
	if (q == e || *q != '{')
		return NULL;
	while (q < e && *q != '}' && *q != '\\' && (q == s || *q != '{'))
		q++;
	if (q == e || *q != '}')
		return NULL;
	*p = q + 1;
	return s;
}

static bool canonical(const char *s, size_t len, struct gb_tline *o)
{
	const char *p = s, *e = s + len;
	if (!lit(&p, e, "{\"t\":\"", 6))
		return false;
	if (lit(&p, e, "exec\"", 5))
		o->type = GB_TL_EXEC;
	else if (lit(&p, e, "read\"", 5))
		o->type = GB_TL_READ;
	else if (lit(&p, e, "write\"", 6))
		o->type = GB_TL_WRITE;
	else if (lit(&p, e, "fault\"", 6))
		o->type = GB_TL_FAULT;
	else
		return false;
	if (!lit(&p, e, ",\"vcpu\":", 8) || !dec(&p, e, &o->vcpu))
		return false;
	if (o->type != GB_TL_EXEC && (!lit(&p, e, ",\"addr\":", 8) || !hexq(&p, e, &o->addr)))
		return false;
	if ((o->type == GB_TL_READ || o->type == GB_TL_WRITE) &&
	    (!lit(&p, e, ",\"size\":", 8) || !dec(&p, e, &o->size)))
		return false;
	if ((o->type == GB_TL_READ || o->type == GB_TL_WRITE) && lit(&p, e, ",\"val\":\"", 8)) {
		o->val = p;
		while (p < e && *p != '"' && *p != '\\')
			p++;
		if (!lit(&p, e, "\"", 1))
			return false;
		o->val_len = (uint32_t)(p - 1 - o->val);
	}
	if (!lit(&p, e, ",\"pc\":", 6) || !hexq(&p, e, &o->pc))
		return false;
	if (o->type == GB_TL_EXEC && lit(&p, e, ",\"regs\":", 8)) {
		if (!(o->regs = flat_object(&p, e)))
			return false;
		o->regs_len = (uint32_t)(p - o->regs);
	}
	if (o->type == GB_TL_FAULT && lit(&p, e, ",\"err\":", 7)) {
		if (!hexq(&p, e, &o->err))
			return false;
		o->has_err = true;
	}
	return lit(&p, e, ",\"vt\":", 6) && dec(&p, e, &o->vt) && lit(&p, e, "}", 1) && p == e;
}

int gb_tline_parse(const char *s, size_t len, struct gb_tline *o)
{
	memset(o, 0, sizeof(*o));
	o->vcpu = o->size = o->vt = -1;
	if (canonical(s, len, o))
		return 0;
	return general(s, len, o);
}

static int general(const char *s, size_t len, struct gb_tline *o)
{
	const char *p = s, *e = s + len;
	bool has_t = false;
	memset(o, 0, sizeof(*o));
	o->vcpu = o->size = o->vt = -1;
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	if (p == e || *p++ != '{')
		return -EINVAL;
	for (;;) {
		if (p == e || *p != '"')
			return slow(s, len, o);
		const char *k = ++p;
		while (p < e && *p != '"' && *p != '\\')
			p++;
		if (p + 1 >= e || *p != '"' || p[1] != ':')
			return slow(s, len, o);
		size_t kn = (size_t)(p - k);
		p += 2;
		if (p < e && *p == '"') {
			const char *v = ++p;
			while (p < e && *p != '"' && *p != '\\')
				p++;
			if (p == e || *p != '"')
				return slow(s, len, o);
			set_str(o, k, kn, v, (size_t)(p - v), &has_t);
			p++;
		} else if (p < e && (*p == '-' || (*p >= '0' && *p <= '9'))) {
			bool neg = *p == '-';
			int64_t v = 0;
			p += neg;
			const char *d = p;
			while (p < e && *p >= '0' && *p <= '9')
				v = v * 10 + (*p++ - '0');
			if (p == d || p - d > 18 || (p < e && (*p == '.' || *p == 'e' || *p == 'E')))
				return slow(s, len, o);
			set_num(o, k, kn, neg ? -v : v);
		} else if (p < e && *p == '{') {
			const char *obj = flat_object(&p, e);
			if (!obj)
				return slow(s, len, o);
			if (kn == 4 && !memcmp(k, "regs", 4)) {
				o->regs = obj;
				o->regs_len = (uint32_t)(p - obj);
			}
		} else if (p + 4 <= e && (!memcmp(p, "true", 4) || !memcmp(p, "null", 4))) {
			if (kn == 3 && !memcmp(k, "err", 3))
				o->has_err = true;
			p += 4;
		} else if (p + 5 <= e && !memcmp(p, "false", 5)) {
			p += 5;
		} else {
			return slow(s, len, o);
		}
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		if (p < e && *p == '}')
			break;
		return slow(s, len, o);
	}
	for (p++; p < e; p++)
		if (*p != ' ' && *p != '\t')
			return slow(s, len, o);
	return has_t ? 0 : -EINVAL;
}
