/* The base layer's small contracts that every other layer trusts: the one-line error format (whole lines,
 * so a wrong kind or order shows), the exit status handed to the hook, aligned allocation's alignment and
 * padding at their thresholds, and SHA-256 of a file from an offset at each residue of its 64 KiB reads
 * (check_idx has the standard's vectors). */
#include "../check_run.h"
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/sha256.h"

static jmp_buf back;
static int hooked = -1;

/* A die() that returns: the status is kept, and MPI (not running here) is never reached. */
static void hook(int code)
{
    hooked = code;
    longjmp(back, 1);
}

/* stderr into a scratch file for the lines a call prints; Check runs each case in its own process. */
static FILE *capture(void)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fflush(stderr);
    ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
    return f;
}

static const char *captured(FILE *f)
{
    static char text[4096];
    fflush(stderr);
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    return text;
}

static const char *host(void)
{
    static char h[256] = "?";
    gethostname(h, sizeof h - 1);
    return h;
}

START_TEST(die_line_and_status)
{
    char want[1024];
    FILE *f = capture();
    error_set_program("tprog");
    error_set_exit_hook(hook);
    if (!setjmp(back))
        die_at("src/x.c", 42, EX_DATAERR, "bad %s %d", "value", 7);
    ck_assert_int_eq(hooked, EX_DATAERR);
    snprintf(want, sizeof want, "tprog: error: bad value 7 [%s, src/x.c:42]\n", host());
    ck_assert_str_eq(captured(f), want);
}
END_TEST

START_TEST(warn_line_returns)
{
    char want[1024];
    FILE *f = capture();
    error_set_program("tprog");
    warn_at("src/y.c", 9, "slow %d", 3);
    snprintf(want, sizeof want, "tprog: warning: slow 3 [%s, src/y.c:9]\n", host());
    ck_assert_str_eq(captured(f), want);
}
END_TEST

/* Without MPI this process is rank 0: die_all prints its line once, exit_all passes the status on. */
START_TEST(die_all_on_rank_zero)
{
    char want[1024];
    FILE *f = capture();
    error_set_program("tprog");
    error_set_exit_hook(hook);
    ck_assert_int_eq(world_rank(), 0);
    if (!setjmp(back))
        die_all_at("src/z.c", 1, EX_USAGE, "no %s", "option");
    ck_assert_int_eq(hooked, EX_USAGE);
    snprintf(want, sizeof want, "tprog: error: no option [%s, src/z.c:1]\n", host());
    ck_assert_str_eq(captured(f), want);
    hooked = -1;
    if (!setjmp(back))
        exit_all(75);
    ck_assert_int_eq(hooked, 75);
}
END_TEST

/* Large buffers (from 4 MiB) are aligned to a 2 MiB huge page; every buffer is padded to whole 64-byte
 * lines, which the vector loops may read to the end of. */
START_TEST(aligned_thresholds)
{
    enum { HUGE = 2u << 20 };
    size_t sizes[] = {0, 1, 63, 64, 65, 2 * HUGE - 1, 2 * HUGE, 2 * HUGE + 1, 3 * HUGE};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i], padded = n ? (n + 63) / 64 * 64 : 64;
        unsigned char *p = xmalloc_aligned(n);
        ck_assert_uint_eq((uintptr_t)p % 64, 0);
        if (n >= 2 * HUGE)
            ck_assert_msg((uintptr_t)p % HUGE == 0, "%zu bytes at %p: not on a 2 MiB boundary", n, (void *)p);
        ck_assert_msg(malloc_usable_size(p) >= padded, "%zu bytes: %zu usable, %zu wanted", n, malloc_usable_size(p),
                      padded);
        memset(p, 0xa5, padded);
        free(p);
    }
    void *z = xcalloc(0, 0), *m = xmalloc(0);
    ck_assert_ptr_nonnull(z);
    ck_assert_ptr_nonnull(m);
    free(z);
    free(m);
}
END_TEST

/* A file hashed from an offset, at 64 KiB reads: sizes one short of, at and one past the buffer, and the
 * result always the in-memory digest of the same bytes, with their count. */
START_TEST(sha256_file_offsets)
{
    enum { BUF = 1 << 16 };
    size_t lens[] = {0, 1, BUF - 1, BUF, BUF + 1, 2 * BUF + 7};
    uint64_t froms[] = {0, 1, 5};
    unsigned char *data = malloc(2 * BUF + 7);
    for (size_t i = 0; i < 2 * BUF + 7; i++)
        data[i] = (unsigned char)(i * 131 + (i >> 8));
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
        for (size_t o = 0; o < sizeof froms / sizeof *froms; o++) {
            FILE *f = tmpfile();
            ck_assert_uint_eq(fwrite(data, 1, lens[l], f), lens[l]);
            fflush(f);
            char want[SHA256_HEX_LEN + 1], got[SHA256_HEX_LEN + 1];
            size_t from = froms[o] < lens[l] ? froms[o] : lens[l];
            uint64_t bytes = 12345;
            sha256_hex(data + from, lens[l] - from, want);
            ck_assert_int_eq(sha256_fd_hex(fileno(f), froms[o], got, &bytes), 0);
            ck_assert_msg(strcmp(got, want) == 0, "%zu bytes from %zu: %s, want %s", lens[l], (size_t)froms[o], got,
                          want);
            ck_assert_uint_eq(bytes, lens[l] - from);
            fclose(f);
        }
    free(data);
    char hex[SHA256_HEX_LEN + 1];
    ck_assert_int_eq(sha256_fd_hex(-1, 0, hex, NULL), EBADF);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("base");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, die_line_and_status);
    tcase_add_test(tc, warn_line_returns);
    tcase_add_test(tc, die_all_on_rank_zero);
    tcase_add_test(tc, aligned_thresholds);
    suite_add_tcase(s, tc);
    TCase *th = tcase_create("sha256");
    tcase_add_test(th, sha256_file_offsets);
    suite_add_tcase(s, th);
    return check_run(s);
}
