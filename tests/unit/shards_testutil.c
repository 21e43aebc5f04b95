/* The shard suites' fixtures (shards_testutil.h). */
#include "../check_run.h"
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_testutil.h"
#include "data/idx.h"
#include "data/shards.h"
#include "shards_testutil.h"

char *g_dir;

void dir_setup(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    g_dir = tu_mkdtemp("check_shards");
}
void dir_teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}

/* A fresh subdirectory of g_dir. */
char *subdir(const char *tag)
{
    static int k;
    char name[128];
    snprintf(name, sizeof name, "%s-%d-%d", tag, (int)getpid(), k++);
    char *p = tu_path(g_dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    return p;
}

/* Synthetic IDX files written and parsed back, as mnist2h5 does. */
dataset make_data(uint64_t n, uint64_t seed)
{
    dataset d;
    uint8_t *im, *lb;
    tu_synth(n, seed, &im, &lb);
    char *dir = subdir("idx"), *pi = tu_path(dir, "images"), *pl = tu_path(dir, "labels");
    tu_write_idx_images(pi, im, n);
    tu_write_idx_labels(pl, lb, n);
    idx_set set;
    idx_load(pi, pl, &set);
    d.n = set.count;
    d.images = set.images;
    d.labels = set.labels;
    memcpy(d.sha, set.images_sha256, sizeof d.sha);
    free(im);
    free(lb);
    tu_rmrf(dir);
    free(dir);
    free(pi);
    free(pl);
    return d;
}

void free_data(dataset *d)
{
    free(d->images);
    free(d->labels);
}

/* A written shard set in a fresh directory. */
char *write_set(const dataset *d, int nshards, const char *prefix)
{
    char *dir = subdir(prefix);
    shards_write(dir, prefix, nshards, d->images, d->labels, d->n, d->sha);
    return dir;
}

char *shard_path(const char *dir, const char *prefix, int i, int m)
{
    char name[256];
    return tu_path(dir, shards_name(name, sizeof name, prefix, i, m));
}
