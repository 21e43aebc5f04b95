/* Model files: HDF5 with one float32 dataset per tensor, named and shaped like the PyTorch state_dict
 * ("conv1.weight" [32,1,3,3], ...), so h5py + torch.load_state_dict read them directly. */
#ifndef MNIST_CHECKPOINT_H
#define MNIST_CHECKPOINT_H
#include <hdf5.h>

#include "model.h"

/* Fails early (73) if PATH's directory cannot take the file, before hours of training. Collective. */
void checkpoint_check_writable(const char *option, const char *path);
/* Written to PATH.tmp.PID and renamed: a crash never leaves a file that looks complete. */
void checkpoint_save_model(const char *path, model *m, int epoch, double test_accuracy);
/* Dies 66 if missing, 65 if it is not a model file or holds another model / other shapes. */
void checkpoint_load_model(const char *path, model *m);

/* The pieces of that layout, for files that hold more than a model (train_state.c). */
extern const char checkpoint_format[]; /* the "format" attribute --load-model expects */
/* A tensor from the flat buffer base at loc under its state_dict name; 0, or -1 when HDF5 fails. */
int checkpoint_write_tensor(hid_t loc, const tensor_desc *t, const float *base);
/* The tensor into base; NULL, or why it failed ("is missing", ...) for the caller's message. */
const char *checkpoint_read_tensor(hid_t loc, const tensor_desc *t, float *base);
/* Scalar attributes; writing dies 74 when HDF5 fails. Reading returns a malloc'd string, NULL if absent. */
void checkpoint_write_attr(hid_t loc, const char *name, hid_t type, const void *value);
void checkpoint_write_string_attr(hid_t loc, const char *name, const char *value);
char *checkpoint_read_string_attr(hid_t loc, const char *name);
#endif
