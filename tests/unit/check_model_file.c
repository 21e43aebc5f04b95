/* --save-model / --load-model's layout (model_file.c) without a run: a saved model loads back bit for bit,
 * BatchNorm's running statistics and num_batches_tracked (an int64, 1234 here, past int8 and int16's
 * reach) included; a tensor differing in its first or its last dimension, in its rank, or absent is
 * told apart; and each problem's words. */
#include "../check_run.h"
#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "data_testutil.h"
#include "nn/model.h"
#include "nn/cpu/nn_cpu.h"
#include "train/model_file.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp("check_model_file"); }
static void teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

/* Saved with seed 3 and every buffer set, then loaded into a model of seed 4: the same bits. */
START_TEST(round_trip)
{
    const char *kinds[2] = {"net", "convnet"};
    char *path = tu_path(dir, kinds[_i]);
    model *m = model_create_on(&nn_cpu, model_kind_of(kinds[_i]), 1),
          *r = model_create_on(&nn_cpu, model_kind_of(kinds[_i]), 1);
    model_init_params(m, 3);
    model_init_params(r, 4);
    float *b = model_buffers(m);
    for (size_t i = 0; i < model_buffer_size(m); i++)
        b[i] = 0.25f * (float)i - 3.0f;
    for (int i = 0; i < model_num_buffers(m); i++)
        if (strstr(model_buffer(m, i)->name, "num_batches_tracked"))
            b[model_buffer(m, i)->offset] = 1234.0f;
    model_file_save(path, m, 7, 0.5);
    model_file_load(path, r);
    ck_assert_mem_eq(model_params(r), model_params(m), model_num_params(m) * sizeof(float));
    if (model_buffer_size(m))
        ck_assert_mem_eq(model_buffers(r), model_buffers(m), model_buffer_size(m) * sizeof(float));
    model_free(m);
    model_free(r);
    free(path);
}
END_TEST

/* conv1.weight [32,1,3,3] read as other shapes: each dimension's change is EINVAL, a name not there ENOENT. */
START_TEST(tensor_shapes)
{
    char *path = tu_path(dir, "shapes");
    model *m = model_create_on(&nn_cpu, MODEL_NET, 1);
    model_file_save(path, m, 1, 0.0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    float *base = calloc(model_num_params(m), sizeof *base);
    tensor_desc t = *model_tensor(m, 0);
    ck_assert_int_eq(model_file_read_tensor(f, &t, base), 0);
    ck_assert_mem_eq(base, model_params(m), t.count * sizeof(float));
    t.shape[0] = 31;
    ck_assert_int_eq(model_file_read_tensor(f, &t, base), EINVAL);
    t.shape[0] = 32, t.shape[3] = 4;
    ck_assert_int_eq(model_file_read_tensor(f, &t, base), EINVAL);
    t.shape[3] = 3, t.ndim = 3;
    ck_assert_int_eq(model_file_read_tensor(f, &t, base), EINVAL);
    t.ndim = 4, t.name = "conv1.weigh"; /* a prefix of a name is no name */
    ck_assert_int_eq(model_file_read_tensor(f, &t, base), ENOENT);
    H5Fclose(f);
    free(base);
    model_free(m);
    free(path);
}
END_TEST

START_TEST(problems)
{
    ck_assert_str_eq(model_file_problem(ENOENT), "is missing");
    ck_assert_str_eq(model_file_problem(EINVAL), "has another shape than this model's");
    ck_assert_str_eq(model_file_problem(EIO), "cannot be read");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_file");
    TCase *tc = tcase_create("model_file");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, round_trip, 0, 2);
    tcase_add_test(tc, tensor_shapes);
    tcase_add_test(tc, problems);
    suite_add_tcase(s, tc);
    return check_run(s);
}
