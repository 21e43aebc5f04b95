#include "nn/cpu/onednn_arg.h"

#include <string.h>

#include "base/errors.h"

void onednn_check(dnnl_status_t s, const char *call, const char *file, int line)
{
    if (s == dnnl_success)
        return;
    die_at(file, line, s == dnnl_out_of_memory ? EX_OSERR : EX_SOFTWARE, "oneDNN %s failed: status %d%s", call, (int)s,
           s == dnnl_out_of_memory ? " (out of memory)" : "");
}

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static void start(void)
{
    if (engine)
        return;
    DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
}

dnnl_engine_t onednn_engine(void)
{
    start();
    return engine;
}

dnnl_stream_t onednn_stream(void)
{
    start();
    return stream;
}

/* Activations are CNHW, [C][N][H][W] with rows ld floats apart (layers.h): strided NCHW to oneDNN. With one
 * sample and no junk columns that is dense NCHW, which oneDNN then takes without a reorder (it compares
 * strides, even those of a dimension of size 1). */
dnnl_memory_desc_t onednn_cnhw_md(int N, int C, int H, int W, int ld)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {N, C, H, W}, strides = {(dnnl_dim_t)H * ld, (dnnl_dim_t)N * H * ld, ld, 1};
    if (N == 1 && ld == W)
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nchw));
    else
        DNNL_CHECK(dnnl_memory_desc_init_by_strides(&md, 4, dims, dnnl_f32, strides));
    return md;
}

dnnl_memory_desc_t onednn_dense_md(int ndims, const dnnl_dims_t dims, dnnl_format_tag_t tag)
{
    dnnl_memory_desc_t md;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, ndims, dims, dnnl_f32, tag));
    return md;
}

void onednn_arg_init(size_t *arena_bytes, tensor_arg *a, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim,
                     int input)
{
    DNNL_CHECK(dnnl_memory_create(&a->user, user, onednn_engine(), DNNL_MEMORY_NONE));
    a->prim = a->user;
    a->reorder = NULL;
    if (dnnl_memory_desc_equal(user, prim))
        return;
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_memory_create(&a->prim, prim, onednn_engine(), DNNL_MEMORY_NONE));
    a->offset = *arena_bytes;
    *arena_bytes += (dnnl_memory_desc_get_size(prim) + 63) / 64 * 64;
    if (input)
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, user, onednn_engine(), prim, onednn_engine(), NULL));
    else
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, prim, onednn_engine(), user, onednn_engine(), NULL));
    DNNL_CHECK(dnnl_primitive_create(&a->reorder, pd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
}

void onednn_arg_destroy(tensor_arg *a)
{
    if (!a->user)
        return;
    if (a->prim != a->user) {
        DNNL_CHECK(dnnl_primitive_destroy(a->reorder));
        DNNL_CHECK(dnnl_memory_destroy(a->prim));
    }
    DNNL_CHECK(dnnl_memory_destroy(a->user));
    memset(a, 0, sizeof *a);
}

void onednn_run(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
    DNNL_CHECK(dnnl_primitive_execute(p, onednn_stream(), nargs, args));
}

static void run_reorder(const tensor_arg *a, int input)
{
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, input ? a->user : a->prim}, {DNNL_ARG_TO, input ? a->prim : a->user}};
    onednn_run(a->reorder, 2, args);
}

dnnl_memory_t onednn_arg_in(const tensor_arg *a, const void *p)
{
    DNNL_CHECK(dnnl_memory_set_data_handle(a->user, (void *)p));
    if (a->reorder)
        run_reorder(a, 1);
    return a->prim;
}

dnnl_memory_t onednn_arg_out(const tensor_arg *a, void *p)
{
    DNNL_CHECK(dnnl_memory_set_data_handle(a->user, p));
    return a->prim;
}

void onednn_arg_done(const tensor_arg *a)
{
    if (a->reorder)
        run_reorder(a, 0);
}

const dnnl_memory_desc_t *onednn_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index)
{
    return dnnl_primitive_desc_query_md(pd, what, index);
}

dnnl_primitive_t onednn_create(const_dnnl_primitive_desc_t pd)
{
    dnnl_primitive_t p;
    DNNL_CHECK(dnnl_primitive_create(&p, pd));
    return p;
}
