/* The one way every Check suite runs: all cases, normal output, exit status for automake's harness. Every
 * test file includes Check through this header. */
#ifndef MNIST_DDP_CHECK_RUN_H
#define MNIST_DDP_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* Check marks each assertion that passes (_mark_point: in fork mode a message to the parent process, so that a
 * crash can name the last one). The suites' loops assert per element, millions of times: the marks took 80% of
 * check_gemm's time, and under the sanitizers (which wrap each message's allocation and copy) most of CI's
 * sanitized stage. Passing assertions mark nothing here; a failing one still stops its test with its file,
 * line and message, and a crash is located by the sanitizers' stack or a debugger. */
#define _mark_point(file, line) ((void)0)

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
