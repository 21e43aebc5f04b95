#include "data/shard_names.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "data/shards.h"

int shards_prefix_ok(const char *prefix)
{
    size_t len = prefix ? strlen(prefix) : 0;
    if (len == 0 || len > 64 || prefix[0] == '.' || prefix[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = prefix[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}

char *shards_name(char *buf, size_t len, const char *prefix, int index, int count)
{
    snprintf(buf, len, "%s-%05d-of-%05d.h5", prefix, index, count);
    return buf;
}

char *shard_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Parse "<prefix>-<digits>-of-<digits>.h5". Returns 0 if name is not of that form, 1 if it is and
 * canonical (5-digit padding), -1 if it is of that form but not canonical. */
static int parse_name(const char *name, const char *prefix, int *index, int *count)
{
    size_t plen = strlen(prefix), len = strlen(name);
    if (len < plen + 1 || strncmp(name, prefix, plen) != 0 || name[plen] != '-')
        return 0;
    const char *p = name + plen + 1;
    long a = 0, b = 0;
    int da = 0, db = 0;
    for (; *p >= '0' && *p <= '9'; p++, da++)
        if (da < 9)
            a = a * 10 + (*p - '0');
    if (!da || strncmp(p, "-of-", 4) != 0)
        return 0;
    for (p += 4; *p >= '0' && *p <= '9'; p++, db++)
        if (db < 9)
            b = b * 10 + (*p - '0');
    if (!db || strcmp(p, ".h5") != 0)
        return 0;
    if (da > 9 || db > 9 || a > SHARDS_MAX || b > SHARDS_MAX)
        return -1;
    char canon[512];
    shards_name(canon, sizeof canon, prefix, (int)a, (int)b);
    if (strcmp(canon, name) != 0)
        return -1;
    *index = (int)a;
    *count = (int)b;
    return 1;
}

static int cmp_entry(const void *a, const void *b)
{
    const shard_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int shard_scan_dir(const char *dir, const char *prefix, int lenient, shard_entry **out, size_t *nout)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t n = 0, cap = 16;
    shard_entry *v = xmalloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int index = 0, count = 0;
        if (e->d_name[0] == '.')
            continue;
        int r = parse_name(e->d_name, prefix, &index, &count);
        if (r == 0)
            continue;
        if (r < 0) {
            if (lenient)
                continue;
            die(EX_DATAERR,
                "unexpected file '%s' in shard directory '%s': shard files are named "
                "%s-NNNNN-of-MMMMM.h5 (5 digits, count <= %d)",
                e->d_name, dir, prefix, SHARDS_MAX);
        }
        if (n == cap)
            v = xrealloc(v, (cap *= 2) * sizeof *v);
        v[n].name = xstrdup(e->d_name);
        v[n].index = index;
        v[n].count = count;
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_entry);
    *out = v;
    *nout = n;
    return 0;
}

void shard_entries_free(shard_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}
