/* cuBLAS opened at run time (src/gpu/cuda/cublas_dl.c), no GPU needed: the library the build found opens and the calls
 * reach it; a library that cannot be opened, or one without cuBLAS's functions, turns every call into
 * CUBLAS_STATUS_NOT_INITIALIZED with a status text naming the library and why (what a GPU job then stops with,
 * exit 69, through cuda_check.h). Each case runs in a process of its own (Check's fork mode): one open each. */
#include "config.h"

#include "../check_run.h"
#include <string.h>

#include <cublas_v2.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h declares cublasLtLoggerForceDisable() */
#include <cublasLt.h>
#pragma GCC diagnostic pop

#include "gpu/cuda/cublas_dl.h"

/* The calls a failed open leaves: every one NOT_INITIALIZED, the text saying WHY. */
static void assert_unloaded(const char *why)
{
    cublasHandle_t h = NULL;
    float x = 0;
    ck_assert_int_eq(cublasCreate_v2(&h), CUBLAS_STATUS_NOT_INITIALIZED);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
    ck_assert_int_eq(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &x, &x, 1, &x, 1, &x, &x, 1),
                     CUBLAS_STATUS_NOT_INITIALIZED);
    cublasLtHandle_t lt = NULL;
    ck_assert_int_eq(cublasLtCreate(&lt), CUBLAS_STATUS_NOT_INITIALIZED);
    ck_assert_ptr_null(lt);
    ck_assert_str_eq(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
    const char *s = cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
    ck_assert_msg(strstr(s, why) != NULL, "status text '%s' does not say '%s'", s, why);
}

START_TEST(test_opens_cublas)
{
    ck_assert_int_eq(cublas_dl_open(NULL), 1);
    /* The library's own names and texts, not the stand-in's. */
    ck_assert_str_eq(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
    const char *s = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
    ck_assert_msg(*s && !strstr(s, "could not be loaded"), "status text '%s'", s);
    /* Without a GPU cuBLAS refuses a handle; with one it makes one. Either way the call reached it. */
    cublasHandle_t h = NULL;
    cublasStatus_t r = cublasCreate_v2(&h);
    ck_assert_msg(r == CUBLAS_STATUS_SUCCESS || r == CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate: %s",
                  cublasGetStatusName(r));
    if (r == CUBLAS_STATUS_SUCCESS)
        ck_assert_int_eq(cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS);
    /* cuBLASLt opened beside it: a handle needs no GPU; a descriptor's checks are the library's own. */
    cublasLtHandle_t lt = NULL;
    r = cublasLtCreate(&lt);
    ck_assert_msg(r == CUBLAS_STATUS_SUCCESS || r == CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtCreate: %s",
                  cublasGetStatusName(r));
    if (r == CUBLAS_STATUS_SUCCESS)
        ck_assert_int_eq(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t l = NULL;
    ck_assert_int_eq(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 3, 4), CUBLAS_STATUS_SUCCESS);
    ck_assert_int_eq(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
}
END_TEST

START_TEST(test_missing_library)
{
    ck_assert_int_eq(cublas_dl_open("libmnist-ddp-no-such-cublas.so.13"), 0);
    assert_unloaded("cuBLAS could not be loaded: libmnist-ddp-no-such-cublas.so.13: cannot open shared object");
    /* One open per process: a later call does not retry, nor succeed with another name. */
    ck_assert_int_eq(cublas_dl_open(NULL), 0);
    assert_unloaded("LD_LIBRARY_PATH");
}
END_TEST

START_TEST(test_not_cublas)
{
    ck_assert_int_eq(cublas_dl_open("libm.so.6"), 0);
    assert_unloaded("libm.so.6 has no cublasCreate_v2");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cublas_dl");
    TCase *tc = tcase_create("cublas_dl");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_opens_cublas);
    tcase_add_test(tc, test_missing_library);
    tcase_add_test(tc, test_not_cublas);
    suite_add_tcase(s, tc);
    return check_run(s);
}
