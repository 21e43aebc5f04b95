/* oneDNN's plumbing for conv_onednn.c: the engine and stream, calls checked, and a tensor as the layer keeps
 * it beside the layout a primitive wants, with the reorder between them. Built with oneDNN only. */
#ifndef MNIST_ONEDNN_ARG_H
#define MNIST_ONEDNN_ARG_H
#include <dnnl.h>
#include <stddef.h>

/* A failing oneDNN call is a bug or exhausted memory, never bad input: one line naming the call. */
#define DNNL_CHECK(call) onednn_check((call), #call, __FILE__, __LINE__)
void onednn_check(dnnl_status_t s, const char *call, const char *file, int line);

/* The CPU engine and its stream, created on first use. */
dnnl_engine_t onednn_engine(void);
dnnl_stream_t onednn_stream(void);

/* Activations are CNHW, [C][N][H][W] with rows ld floats apart (layers.h), as a strided NCHW descriptor. */
dnnl_memory_desc_t onednn_cnhw_md(int N, int C, int H, int W, int ld);
dnnl_memory_desc_t onednn_dense_md(int ndims, const dnnl_dims_t dims, dnnl_format_tag_t tag);
/* Descriptor `what` (index 1: the bias of weights or diff_weights) of a primitive descriptor. */
const dnnl_memory_desc_t *onednn_query(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index);
dnnl_primitive_t onednn_create(const_dnnl_primitive_desc_t pd);
void onednn_run(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args);

/* A tensor as the layer keeps it (user) and as the primitive wants it (prim). When the layouts differ,
 * prim is a buffer at `offset` in the shared arena and `reorder` converts between them, in the direction the
 * argument flows (an input: user to prim before the primitive; an output: prim to user after it). */
typedef struct {
    dnnl_memory_t user, prim;
    dnnl_primitive_t reorder;
    size_t offset;
} tensor_arg;
/* a from the user and primitive layouts; where they differ, prim's buffer is placed at *arena_bytes, which
 * grows by its size (rounded to 64), and the reorder runs in the direction of `input`. */
void onednn_arg_init(size_t *arena_bytes, tensor_arg *a, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim,
                     int input);
void onednn_arg_destroy(tensor_arg *a);
/* Point the argument at the layer's tensor p; an input is converted for the primitive now. */
dnnl_memory_t onednn_arg_in(const tensor_arg *a, const void *p);
dnnl_memory_t onednn_arg_out(const tensor_arg *a, void *p);
/* After the primitive: an output in the primitive's layout is converted to the layer's. */
void onednn_arg_done(const tensor_arg *a);
#endif
