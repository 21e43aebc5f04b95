/* Shard-set manifests (src/data/manifest.h): written by the shard writer, checked by the reader before
 * the HDF5 library opens any shard. */
#include "data/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "data/shards.h"

#define MANIFEST_MAGIC     "mnist_ddp-shard-manifest 1"
/* A header and SHARDS_MAX lines of at most ~250 bytes (64-char prefix in the name, two 20-digit
 * numbers, 64 hex digits): anything larger is not a manifest, and is refused before reading it. */
#define MANIFEST_MAX_BYTES (32u << 20)

char *manifest_path(const char *dir, const char *prefix)
{
    size_t n = strlen(dir) + strlen(prefix) + sizeof "/.manifest";
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s.manifest", dir, prefix);
    return p;
}

int manifest_hash_file(const char *path, uint64_t *bytes, char hex[SHA256_HEX_LEN + 1])
{
    /* O_NONBLOCK: a FIFO in a shard's place must not hang the open (no effect on regular files). */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return errno;
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? -1 : sha256_fd_hex(fd, 0, hex, bytes);
    close(fd);
    return err;
}

void manifest_free(manifest *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->count; i++)
        free(m->f[i].name);
    free(m->f);
    free(m->path);
    free(m);
}

/* ---------------------------------------------------------------- writing */

/* Append printf output to the growing buffer *buf (length *len, capacity *cap). */
__attribute__((format(printf, 4, 5))) static void append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (k < 0)
            die(EX_SOFTWARE, "cannot format a manifest line");
        if ((size_t)k < *cap - *len) {
            *len += (size_t)k;
            return;
        }
        *cap = 2 * *cap + (size_t)k;
        *buf = xrealloc(*buf, *cap);
    }
}

int manifest_write(const char *tmp, const char *prefix, const manifest *m)
{
    size_t len = 0, cap = 4096;
    char *buf = xmalloc(cap);
    append(&buf, &len, &cap, "%s\nprefix %s\nshards %d\ntotal_samples %llu\nsource_sha256 %s\n", MANIFEST_MAGIC, prefix,
           m->count, (unsigned long long)m->total, m->source_sha256[0] ? m->source_sha256 : "-");
    for (int i = 0; i < m->count; i++)
        append(&buf, &len, &cap, "file %s %llu %llu %s\n", m->f[i].name, (unsigned long long)m->f[i].samples,
               (unsigned long long)m->f[i].bytes, m->f[i].sha256);
    char self[SHA256_HEX_LEN + 1];
    sha256_hex(buf, len, self);
    append(&buf, &len, &cap, "manifest_sha256 %s\n", self);
    int err = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0)
        err = errno;
    else if ((err = af_write_all(fd, buf, len)) == 0 && fsync(fd) != 0)
        err = errno;
    if (fd >= 0 && close(fd) != 0 && !err)
        err = errno;
    free(buf);
    return err;
}

/* ---------------------------------------------------------------- reading */

/* The manifest text being parsed: line by line, each damage a die naming the manifest. */
typedef struct {
    const char *path;
    char *cur, *end;
    int line;
} cursor;

__attribute__((format(printf, 2, 3))) _Noreturn static void damaged(const cursor *c, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char where[32] = "";
    if (c->line > 0) /* 0: the file as a whole */
        snprintf(where, sizeof where, "line %d: ", c->line);
    die(EX_DATAERR, "shard manifest '%s' is damaged (%s%s); regenerate the set with mnist2h5", c->path, where, msg);
}

/* The next line's value after "key ", NUL-terminated in place. */
static char *field(cursor *c, const char *key)
{
    c->line++;
    char *nl = c->cur < c->end ? memchr(c->cur, '\n', (size_t)(c->end - c->cur)) : NULL;
    if (!nl)
        damaged(c, "expected '%s', found the end of the file", key);
    *nl = '\0';
    char *s = c->cur;
    c->cur = nl + 1;
    size_t k = strlen(key);
    if (strncmp(s, key, k) != 0 || (s[k] != ' ' && s[k] != '\0'))
        damaged(c, "expected '%s'", key);
    return s[k] ? s + k + 1 : s + k;
}

/* A decimal number without sign or padding, 0..max; *rest after it (NULL: it must end the value). */
static uint64_t number(const cursor *c, char *s, uint64_t max, char **rest)
{
    uint64_t v = 0;
    char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (d > max || v > (max - d) / 10)
            damaged(c, "number out of range (at most %llu)", (unsigned long long)max);
        v = v * 10 + d;
    }
    if (p == s || (p - s > 1 && *s == '0') || (rest ? *p != ' ' && *p != '\0' : *p != '\0'))
        damaged(c, "expected a number");
    if (rest)
        *rest = *p ? p + 1 : p;
    return v;
}

static void hex_digest(const cursor *c, const char *s, char out[SHA256_HEX_LEN + 1])
{
    size_t n = strspn(s, "0123456789abcdef");
    if (n != SHA256_HEX_LEN || s[n] != '\0')
        damaged(c, "expected a SHA-256 digest of %d lowercase hex digits", SHA256_HEX_LEN);
    memcpy(out, s, SHA256_HEX_LEN + 1);
}

/* Line "file <name> <samples> <bytes> <sha256>" of shard i. */
static void file_line(cursor *c, const char *prefix, manifest *m, int i)
{
    char *s = field(c, "file"), *sp = strchr(s, ' ');
    if (!sp)
        damaged(c, "expected 'file NAME SAMPLES BYTES SHA256'");
    *sp = '\0';
    char want[512];
    shards_name(want, sizeof want, prefix, i, m->count);
    if (strcmp(s, want) != 0)
        damaged(c, "shard %d is named '%.100s', expected '%s'", i, s, want);
    manifest_file *f = &m->f[i];
    f->name = xstrdup(s);
    f->samples = number(c, sp + 1, m->total, &s);
    f->bytes = number(c, s, UINT64_MAX, &s);
    hex_digest(c, s, f->sha256);
}

/* Parse the text (NUL-free, self-digest already checked) into m. */
static void parse(cursor *c, const char *prefix, manifest *m)
{
    if (strcmp(field(c, MANIFEST_MAGIC), "") != 0)
        damaged(c, "not a manifest of this format");
    const char *p = field(c, "prefix");
    if (strcmp(p, prefix) != 0)
        damaged(c, "it describes prefix '%.70s', not '%s'", p, prefix);
    m->count = (int)number(c, field(c, "shards"), SHARDS_MAX, NULL);
    m->total = number(c, field(c, "total_samples"), SHARDS_MAX_SAMPLES, NULL);
    if (m->count < 1 || (uint64_t)m->count > m->total)
        damaged(c, "%d shards for %llu samples", m->count, (unsigned long long)m->total);
    char *sha = field(c, "source_sha256");
    if (strcmp(sha, "-") != 0)
        hex_digest(c, sha, m->source_sha256);
    /* Bounded by the manifest's size: no line, no entry. */
    if ((size_t)m->count > (size_t)(c->end - c->cur) / 80)
        damaged(c, "%d shards do not fit in the rest of the file", m->count);
    m->f = xcalloc((size_t)m->count, sizeof *m->f);
    uint64_t sum = 0;
    for (int i = 0; i < m->count; i++) {
        file_line(c, prefix, m, i);
        sum += m->f[i].samples;
    }
    if (sum != m->total)
        damaged(c, "the files hold %llu samples, total_samples says %llu", (unsigned long long)sum,
                (unsigned long long)m->total);
}

/* The whole file, NUL-terminated, into *buf; its length into *len. Dies on read errors or a size no
 * manifest has. Returns 0, or -1 if there is no manifest. */
static int slurp(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO: refused below, not waited on */
    if (fd < 0 && errno == ENOENT)
        return -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(EX_NOINPUT, "cannot read shard manifest '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > MANIFEST_MAX_BYTES)
        die(EX_DATAERR, "shard manifest '%s' is damaged: %s of %lld bytes (regenerate the set with mnist2h5)", path,
            S_ISREG(st.st_mode) ? "a file" : "not a regular file", (long long)st.st_size);
    *len = (size_t)st.st_size;
    *buf = xmalloc(*len + 1);
    size_t got = 0;
    while (got < *len) {
        ssize_t k = read(fd, *buf + got, *len - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die(k < 0 ? EX_IOERR : EX_DATAERR, "cannot read shard manifest '%s': %s", path,
                k < 0 ? strerror(errno) : "it shrank while being read");
        got += (size_t)k;
    }
    (*buf)[*len] = '\0';
    close(fd);
    return 0;
}

/* The last line must be "manifest_sha256 <digest of everything before it>". */
static void check_self_digest(cursor *c)
{
    size_t tail = sizeof "manifest_sha256 " - 1 + SHA256_HEX_LEN + 1;
    size_t len = (size_t)(c->end - c->cur);
    if (memchr(c->cur, '\0', len))
        damaged(c, "a NUL byte in a text file");
    if (len < tail)
        damaged(c, "no final manifest_sha256 line (truncated?)");
    char *last = c->end - tail;
    if (strncmp(last, "manifest_sha256 ", 16) != 0 || c->end[-1] != '\n' || (last > c->cur && last[-1] != '\n'))
        damaged(c, "no final manifest_sha256 line (truncated?)");
    char want[SHA256_HEX_LEN + 1], got[SHA256_HEX_LEN + 1];
    c->end[-1] = '\0';
    hex_digest(c, last + 16, want);
    sha256_hex(c->cur, (size_t)(last - c->cur), got);
    if (strcmp(want, got) != 0)
        damaged(c, "its content does not match its manifest_sha256 line");
    c->end = last;
}

manifest *manifest_load(const char *dir, const char *prefix)
{
    char *path = manifest_path(dir, prefix), *buf = NULL;
    size_t len = 0;
    if (slurp(path, &buf, &len) != 0) {
        free(path);
        return NULL;
    }
    cursor c = {path, buf, buf + len, 0};
    check_self_digest(&c);
    manifest *m = xcalloc(1, sizeof *m);
    m->path = path;
    parse(&c, prefix, m);
    if (c.cur != c.end)
        damaged(&c, "unexpected text after the last file line");
    free(buf);
    return m;
}

/* ---------------------------------------------------------------- verifying */

static int listed(const manifest *m, const char *name)
{
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->f[i].name, name) == 0)
            return 1;
    return 0;
}

void manifest_verify(const manifest *m, const char *dir, const shard_entry *v, size_t n)
{
    /* v is sorted by (count, index); the manifest lists one count in index order. */
    for (size_t k = 0; k < n; k++)
        if (!listed(m, v[k].name))
            die(EX_DATAERR,
                "shard '%s/%s' is not in the manifest '%s' (a leftover of another conversion? "
                "remove it)",
                dir, v[k].name, m->path);
    for (int i = 0; i < m->count; i++) {
        const manifest_file *f = &m->f[i];
        char *path = shard_join(dir, f->name), hex[SHA256_HEX_LEN + 1];
        uint64_t bytes = 0;
        int err = manifest_hash_file(path, &bytes, hex);
        if (err < 0)
            die(EX_DATAERR, "shard '%s' listed in '%s' is not a regular file", path, m->path);
        if (err)
            die(err == ENOENT ? EX_NOINPUT : EX_IOERR, "cannot read shard '%s' listed in '%s': %s", path, m->path,
                strerror(err));
        if (bytes != f->bytes)
            die(EX_DATAERR,
                "shard '%s' is %llu bytes, the manifest '%s' says %llu: truncated or damaged "
                "(regenerate it with mnist2h5)",
                path, (unsigned long long)bytes, m->path, (unsigned long long)f->bytes);
        if (strcmp(hex, f->sha256) != 0)
            die(EX_DATAERR,
                "shard '%s' does not match its SHA-256 in '%s': the file is damaged or was "
                "replaced (regenerate it with mnist2h5)",
                path, m->path);
        free(path);
    }
}
