/* The HDF5 helpers every shard and model reader goes through (h5util.c), on a file in memory: integer
 * attributes of each signedness with 0 and -1 at the sign's edge, strings fixed and variable, truncated to
 * the buffer, absent attributes, each type a uint8 dataset must not have (named in a whole line), shapes as
 * text, and names that are no dataset. */
#include "../check_run.h"
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/h5util.h"

/* A file in memory with attributes s64 (-1), zero (int32 0), i32 (7), u64 (2^40 + 3), f (1.5), pair (two
 * ints), fixed "abc", vlen "hello", and datasets u8, i8, u16, f64, str [3,28,28]/[4] and a group g. */
static hid_t file(void)
{
    h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    hid_t f = H5Fcreate("check_h5util-in-memory", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    ck_assert_int_ge(f, 0);
    int64_t s64 = -1;
    int32_t zero = 0, i32 = 7, pair[2] = {1, 2};
    uint64_t u64 = (UINT64_C(1) << 40) + 3;
    double fl = 1.5;
    ck_assert_int_eq(h5_write_attr(f, "s64", H5T_STD_I64LE, H5T_NATIVE_INT64, &s64), 0);
    ck_assert_int_eq(h5_write_attr(f, "zero", H5T_STD_I32LE, H5T_NATIVE_INT32, &zero), 0);
    ck_assert_int_eq(h5_write_attr(f, "i32", H5T_STD_I32LE, H5T_NATIVE_INT32, &i32), 0);
    ck_assert_int_eq(h5_write_attr(f, "u64", H5T_STD_U64LE, H5T_NATIVE_UINT64, &u64), 0);
    ck_assert_int_eq(h5_write_attr(f, "f", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &fl), 0);
    hsize_t two = 2;
    hid_t sp = H5Screate_simple(1, &two, NULL), a = H5Acreate2(f, "pair", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, pair);
    H5Aclose(a);
    H5Sclose(sp);
    ck_assert_int_eq(h5_write_str_attr(f, "fixed", "abc"), 0);
    hid_t vt = H5Tcopy(H5T_C_S1);
    H5Tset_size(vt, H5T_VARIABLE);
    const char *hello = "hello";
    ck_assert_int_eq(h5_write_attr(f, "vlen", vt, vt, &hello), 0);
    hsize_t dims[3] = {3, 28, 28};
    const struct {
        const char *name;
        hid_t type;
    } ds[] = {{"u8", H5T_STD_U8LE}, {"i8", H5T_STD_I8LE}, {"u16", H5T_STD_U16LE}, {"f64", H5T_IEEE_F64LE}, {"str", vt}};
    for (size_t k = 0; k < sizeof ds / sizeof *ds; k++) {
        sp = H5Screate_simple(k == 4 ? 1 : 3, k == 4 ? (hsize_t[]){4} : dims, NULL);
        hid_t d = H5Dcreate2(f, ds[k].name, ds[k].type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert_int_ge(d, 0);
        H5Dclose(d);
        H5Sclose(sp);
    }
    H5Tclose(vt);
    H5Gclose(H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    return f;
}

START_TEST(integers)
{
    hid_t f = file();
    uint64_t v = 99;
    ck_assert_int_eq(h5_read_u64_attr("W", f, "u64", &v), 1);
    ck_assert_uint_eq(v, (UINT64_C(1) << 40) + 3);
    ck_assert_int_eq(h5_read_u64_attr("W", f, "i32", &v), 1);
    ck_assert_uint_eq(v, 7);
    ck_assert_int_eq(h5_read_u64_attr("W", f, "zero", &v), 1); /* the sign's edge: 0 is not negative */
    ck_assert_uint_eq(v, 0);
    v = 99;
    ck_assert_int_eq(h5_read_u64_attr("W", f, "absent", &v), 0);
    ck_assert_uint_eq(v, 99);
    char buf[16] = "untouched";
    ck_assert_int_eq(h5_read_str_attr("W", f, "absent", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "untouched");
    ck_assert_int_eq(h5_read_str_attr("W", f, "fixed", buf, sizeof buf), 1);
    ck_assert_str_eq(buf, "abc");
    ck_assert_int_eq(h5_read_str_attr("W", f, "vlen", buf, sizeof buf), 1);
    ck_assert_str_eq(buf, "hello");
    ck_assert_int_eq(h5_read_str_attr("W", f, "vlen", buf, 3), 1); /* cut to the buffer, terminated */
    ck_assert_str_eq(buf, "he");
    ck_assert_int_eq(h5_read_str_attr("W", f, "fixed", buf, 3), 1);
    ck_assert_str_eq(buf, "ab");
    H5Fclose(f);
}
END_TEST

START_TEST(shapes)
{
    hid_t f = file(), d = h5_open_dataset("W", f, "u8");
    hsize_t dims[8];
    char s[32];
    ck_assert_int_eq(h5_dims(d, dims), 3);
    h5_check_uint8("W", d, "u8");
    h5_shape_str(dims, 3, s, sizeof s);
    ck_assert_str_eq(s, "[3,28,28]");
    h5_shape_str(dims, 1, s, sizeof s);
    ck_assert_str_eq(s, "[3]");
    h5_shape_str(dims, 0, s, sizeof s);
    ck_assert_str_eq(s, "[]");
    dims[0] = 60000;
    h5_shape_str(dims, 3, s, 5); /* cut, terminated */
    ck_assert_str_eq(s, "[600");
    H5Dclose(d);
    H5Fclose(f);
}
END_TEST

/* Each refusal in a child: its status and its whole line, "check_h5util: error: WANT [host, file:line]". */
static const struct {
    int kind; /* 0 integer attribute, 1 string attribute, 2 a dataset's uint8 check, 3 opening a dataset */
    const char *name, *want;
} refused[] = {
    {0, "s64", "W: attribute s64 is negative (-1)"},
    {0, "f", "W: attribute f is not a single integer"},
    {0, "pair", "W: attribute pair is not a single integer"},
    {1, "i32", "W: attribute i32 is not a string"},
    {2, "i8", "W: /i8 has type int8, expected uint8"},
    {2, "u16", "W: /u16 has type uint16, expected uint8"},
    {2, "f64", "W: /f64 has type float64, expected uint8"},
    {2, "str", "W: /str has type string, expected uint8"},
    {3, "absent", "W has no /absent dataset"},
    {3, "g", "W: /g is not a dataset"},
};

static void refuse_fn(void *arg)
{
    int k = *(int *)arg;
    hid_t f = file();
    uint64_t v;
    char buf[16];
    if (refused[k].kind == 0)
        h5_read_u64_attr("W", f, refused[k].name, &v);
    else if (refused[k].kind == 1)
        h5_read_str_attr("W", f, refused[k].name, buf, sizeof buf);
    else if (refused[k].kind == 2)
        h5_check_uint8("W", h5_open_dataset("W", f, refused[k].name), refused[k].name);
    else
        h5_open_dataset("W", f, refused[k].name);
}

START_TEST(refusals)
{
    for (int k = 0; k < (int)(sizeof refused / sizeof *refused); k++) {
        char err[2048], head[512];
        int code = tu_run(refuse_fn, &k, err, sizeof err);
        ck_assert_msg(code == EX_DATAERR, "%s: exit %d: %s", refused[k].name, code, err);
        int n = snprintf(head, sizeof head, "check_h5util: error: %s [", refused[k].want);
        size_t e = strlen(err);
        ck_assert_msg(strncmp(err, head, (size_t)n) == 0 && strchr(err, '\n') == err + e - 1 && err[e - 2] == ']',
                      "got: %swant: %s...]", err, head);
    }
}
END_TEST

int main(void)
{
    error_set_program("check_h5util");
    Suite *s = suite_create("h5util");
    TCase *tc = tcase_create("h5util");
    tcase_add_test(tc, integers);
    tcase_add_test(tc, shapes);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return check_run(s);
}
