/* The IDX reader at its limits, each message compared as a whole: a header one byte short of each size
 * the reader tests (2 for the gzip hint, 4 for the magic, the full header), an empty set, the first and last
 * labels out of range, and trailing bytes counted over several of the reader's 4 KiB chunks through a FIFO. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/idx.h"

static char *g_dir;

static void dir_setup(void) { g_dir = tu_mkdtemp("check_idx_edges"); }
static void dir_teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}

typedef struct {
    const char *name;
    int labels; /* read as labels, else as images */
    size_t len;
    uint8_t head[16]; /* the file's first bytes; the rest are 1 */
    const char *msg;  /* the message between "check_idx_edges: error: IDX <kind> file '<path>'" and " [" */
} edge_case;

static const edge_case cases[] = {
    {"one-gzip-byte", 0, 1, {0x1f}, " is truncated: 1 bytes, too short for an IDX header"},
    {"gzip-magic", 0, 2, {0x1f, 0x8b}, " is gzip-compressed: decompress it first (gunzip)"},
    {"three-bytes", 0, 3, {0, 0, 8}, " is truncated: 3 bytes, too short for an IDX header"},
    {"magic-only", 0, 4, {0, 0, 8, 3}, " is truncated: 4 bytes, too short for its 16-byte header"},
    {"header-less-one",
     0,
     15,
     {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0},
     " is truncated: 15 bytes, too short for its 16-byte header"},
    {"labels-header-less-one", 1, 7, {0, 0, 8, 1, 0, 0, 0}, " is truncated: 7 bytes, too short for its 8-byte header"},
    {"body-less-one",
     0,
     16 + 2 * MNIST_PIXELS - 1,
     {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28},
     " is truncated: 1583 bytes, expected 1584"},
    {"body-plus-one",
     0,
     16 + 2 * MNIST_PIXELS + 1,
     {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28},
     " has 1 trailing bytes after the 1584 bytes its header describes"},
    {"first-label-ten", 1, 8 + 3, {0, 0, 8, 1, 0, 0, 0, 3, 10, 9, 9}, ": label 10 at index 0 is out of range 0..9"},
    {"last-label-255", 1, 8 + 3, {0, 0, 8, 1, 0, 0, 0, 3, 9, 0, 255}, ": label 255 at index 2 is out of range 0..9"},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

static void read_fn(void *arg)
{
    const char **a = arg; /* path, "labels" or "images" */
    uint64_t n;
    free(a[1][0] == 'l' ? idx_read_labels(a[0], &n, NULL) : idx_read_images(a[0], &n, NULL));
}

/* The whole line: program, kind, file, problem, then " [host, src/data/idx.c:LINE]" and nothing after (the path
 * as the compiler was given it: ../../src/data/idx.c in make distcheck's out-of-tree build). */
static void expect_line(const char *err, const char *kind, const char *path, const char *msg)
{
    char want[1024];
    snprintf(want, sizeof want, "check_idx_edges: error: IDX %s file '%s'%s [", kind, path, msg);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "got: %s\nwant: %s...", err, want);
    const char *where = strstr(err + strlen(want), "src/data/idx.c:");
    ck_assert_msg(where && strchr(where, ']') == err + strlen(err) - 2 && err[strlen(err) - 1] == '\n',
                  "not one die() line: %s", err);
}

START_TEST(edges_whole_lines)
{
    for (int k = 0; k < NCASES; k++) {
        const edge_case *c = &cases[k];
        uint8_t *buf = malloc(c->len);
        memset(buf, 1, c->len);
        memcpy(buf, c->head, c->len < 16 ? c->len : 16);
        char *p = tu_path(g_dir, c->name), err[4096];
        tu_write_file(p, buf, c->len);
        const char *args[2] = {p, c->labels ? "labels" : "images"};
        int code = tu_run(read_fn, (void *)args, err, sizeof err);
        ck_assert_msg(code == EX_DATAERR, "%s: exit %d: %s", c->name, code, err);
        expect_line(err, args[1], p, c->msg);
        free(buf);
        free(p);
    }
}
END_TEST

/* A full header of zero images, and labels 0 and 9 (the range's ends): accepted. */
START_TEST(edges_accepted)
{
    uint8_t im[16] = {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28}, lb[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 0, 9};
    char *pi = tu_path(g_dir, "empty-set"), *pl = tu_path(g_dir, "ends");
    tu_write_file(pi, im, sizeof im);
    tu_write_file(pl, lb, sizeof lb);
    uint64_t n = 7;
    free(idx_read_images(pi, &n, NULL));
    ck_assert_uint_eq(n, 0);
    uint8_t *l = idx_read_labels(pl, &n, NULL);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(l[0], 0);
    ck_assert_uint_eq(l[1], 9);
    free(l);
    free(pi);
    free(pl);
}
END_TEST

/* Through a FIFO the size is unknown until the end: 5000 bytes too many, read as 4096 + 904, are counted
 * whole. */
START_TEST(fifo_trailing_chunks)
{
    enum { EXTRA = 5000, LEN = 8 + 2 + EXTRA };
    uint8_t *buf = calloc(1, LEN);
    memcpy(buf, (uint8_t[]){0, 0, 8, 1, 0, 0, 0, 2}, 8);
    char *p = tu_path(g_dir, "long-labels"), *fifo = tu_path(g_dir, "fifo"), err[4096];
    tu_write_file(p, buf, LEN);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        tu_copy_file(p, fifo);
        _exit(0);
    }
    const char *args[2] = {fifo, "labels"};
    int code = tu_run(read_fn, (void *)args, err, sizeof err);
    waitpid(pid, NULL, 0);
    ck_assert_int_eq(code, EX_DATAERR);
    expect_line(err, "labels", fifo, " has 5000 trailing bytes after the 10 bytes its header describes");
    free(buf);
    free(p);
    free(fifo);
}
END_TEST

int main(void)
{
    error_set_program("check_idx_edges");
    Suite *s = suite_create("idx_edges");
    TCase *tc = tcase_create("edges");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, edges_whole_lines);
    tcase_add_test(tc, edges_accepted);
    tcase_add_test(tc, fifo_trailing_chunks);
    suite_add_tcase(s, tc);
    return check_run(s);
}
