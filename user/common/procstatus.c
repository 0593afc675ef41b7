#include "common/procstatus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gb_status_field(pid_t pid, const char *key, char *val, size_t len)
{
	char path[64], line[512];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t kl = strlen(key);
	int r = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) || line[kl] != ':')
			continue;
		const char *v = line + kl + 1;
		v += strspn(v, " \t");
		snprintf(val, len, "%.*s", (int)strcspn(v, "\n"), v);
		r = 0;
		break;
	}
	fclose(f);
	return r;
}

int gb_status_u64(pid_t pid, const char *key, uint64_t *out)
{
	char v[64], *end;
	int r = gb_status_field(pid, key, v, sizeof(v));
	if (r)
		return r;
	errno = 0;
	*out = strtoull(v, &end, strncmp(key, "Cap", 3) ? 10 : 16);
	return errno || end == v ? -EINVAL : 0;
}
