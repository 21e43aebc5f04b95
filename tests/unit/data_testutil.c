#define _GNU_SOURCE
#include "data_testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/errors.h"
#include "data/idx.h"
#include "base/rng.h"

char *tu_mkdtemp(const char *tag)
{
    const char *tmp = tu_env("TMPDIR");
    char *p = tu_path(tmp ? tmp : "/tmp", tag);
    size_t n = strlen(p) + 8;
    char *t = xmalloc(n);
    snprintf(t, n, "%s.XXXXXX", p);
    free(p);
    if (!mkdtemp(t))
        die(EX_CANTCREAT, "mkdtemp %s: %s", t, strerror(errno));
    return t;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tu_rmrf(const char *path)
{
    if (path)
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *tu_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void tu_synth(uint64_t n, uint64_t seed, uint8_t **images, uint8_t **labels)
{
    uint8_t *im = xmalloc(n * MNIST_PIXELS + 1), *lb = xmalloc(n + 1);
    uint64_t key = rng_key(seed, 0x5eed);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *p = im + i * MNIST_PIXELS;
        for (int k = 0; k < MNIST_PIXELS; k++)
            p[k] = (uint8_t)(rng_u64(key, i * MNIST_PIXELS + (uint64_t)k) >> 56);
        p[0] = (uint8_t)(i >> 24);
        p[1] = (uint8_t)(i >> 16);
        p[2] = (uint8_t)(i >> 8);
        p[3] = (uint8_t)i;
        lb[i] = (uint8_t)(rng_u64(key ^ 0xabcdef, i) % 10);
    }
    *images = im;
    *labels = lb;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void write_idx(const char *path, const char *what, const uint8_t *hdr, size_t hlen, const uint8_t *data,
                      uint64_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        die(EX_CANTCREAT, "cannot create IDX %s file '%s': %s", what, path, strerror(errno));
    if (fwrite(hdr, 1, hlen, f) != hlen || (len && fwrite(data, 1, (size_t)len, f) != len) || fclose(f) != 0)
        die(EX_IOERR, "cannot write IDX %s file '%s': %s", what, path, strerror(errno));
}

static uint32_t count32(const char *path, uint64_t count)
{
    if (count > UINT32_MAX)
        die(EX_SOFTWARE, "cannot write '%s': %llu samples do not fit an IDX header", path, (unsigned long long)count);
    return (uint32_t)count;
}

void tu_write_idx_images(const char *path, const uint8_t *images, uint64_t count)
{
    uint8_t hdr[16];
    put_be32(hdr, IDX_IMAGES_MAGIC);
    put_be32(hdr + 4, count32(path, count));
    put_be32(hdr + 8, MNIST_ROWS);
    put_be32(hdr + 12, MNIST_COLS);
    write_idx(path, "images", hdr, sizeof hdr, images, count * MNIST_PIXELS);
}

void tu_write_idx_labels(const char *path, const uint8_t *labels, uint64_t count)
{
    uint8_t hdr[8];
    put_be32(hdr, IDX_LABELS_MAGIC);
    put_be32(hdr + 4, count32(path, count));
    write_idx(path, "labels", hdr, sizeof hdr, labels, count);
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
        die(EX_IOERR, "cannot write %s: %s", path, strerror(errno));
}

void tu_copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb");
    if (!f)
        die(EX_NOINPUT, "cannot open %s: %s", from, strerror(errno));
    FILE *g = fopen(to, "wb");
    if (!g)
        die(EX_CANTCREAT, "cannot create %s: %s", to, strerror(errno));
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, n, g) != n)
            die(EX_IOERR, "cannot write %s", to);
    fclose(f);
    if (fclose(g) != 0)
        die(EX_IOERR, "cannot write %s", to);
}

int tu_run(void (*fn)(void *), void *arg, char *err, size_t errlen)
{
    int fd[2];
    if (pipe(fd) != 0)
        die(EX_OSERR, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        die(EX_OSERR, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Check's fork mode leaves its own SIGINT/SIGTERM handlers (which kill the whole test's
         * process group) installed in children: restore the defaults. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        close(fd[0]);
        dup2(fd[1], 2);
        close(fd[1]);
        fn(arg);
        fflush(NULL);
        _exit(0);
    }
    close(fd[1]);
    size_t used = 0;
    char tmp[4096];
    ssize_t r;
    while ((r = read(fd[0], tmp, sizeof tmp)) > 0 || (r < 0 && errno == EINTR)) {
        if (r <= 0)
            continue;
        size_t take = (size_t)r;
        if (errlen && used + take > errlen - 1)
            take = errlen - 1 - used;
        if (errlen)
            memcpy(err + used, tmp, take);
        used += take;
    }
    if (errlen)
        err[used] = '\0';
    close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (errlen && used)
        fprintf(stderr, "  (child stderr) %.*s\n", (int)(err[used - 1] == '\n' ? used - 1 : used), err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void tu_listdir(const char *dir, char *buf, size_t len)
{
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[4096];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 4096)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(buf + o, o < len ? len - o : 0, "%s%s", i ? " " : "", names[i]);
        if (w > 0)
            o += (size_t)w;
        if (o >= len)
            o = len - 1;
        free(names[i]);
    }
}

int tu_count(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!part || strstr(e->d_name, part)))
            n++;
    closedir(d);
    return n;
}

const char *tu_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
