/* The one way every Check suite runs: all cases, normal output, exit status for automake's harness. */
#ifndef MNIST_DDP_CHECK_RUN_H
#define MNIST_DDP_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
