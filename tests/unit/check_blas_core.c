/* Which OpenBLAS kernels mnist_ddp asks for: only where OpenBLAS fell back to Prescott (a CPU model it
 * does not know) on a CPU with AVX2 or AVX-512, the kernels of that ISA; any core OpenBLAS chose itself,
 * and any CPU without those features, is left alone. */
#include "../check_run.h"
#include <stddef.h>

#include "nn/cpu/blas_core.h"

START_TEST(fallback_replaced)
{
    ck_assert_str_eq(blas_core_better("Prescott", 1, 1), "SkylakeX");
    ck_assert_str_eq(blas_core_better("Prescott", 1, 0), "Haswell");
}
END_TEST

START_TEST(choice_kept)
{
    ck_assert_ptr_null(blas_core_better("Prescott", 0, 0)); /* an SSE-only CPU: Prescott is right */
    ck_assert_ptr_null(blas_core_better("Haswell", 1, 1));  /* OpenBLAS's own choice, e.g. for Zen 4 */
    ck_assert_ptr_null(blas_core_better("Zen", 1, 1));
    ck_assert_ptr_null(blas_core_better("SkylakeX", 1, 1));
    ck_assert_ptr_null(blas_core_better(NULL, 1, 1)); /* another CBLAS */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blas_core");
    TCase *tc = tcase_create("choice");
    tcase_add_test(tc, fallback_replaced);
    tcase_add_test(tc, choice_kept);
    suite_add_tcase(s, tc);
    return check_run(s);
}
