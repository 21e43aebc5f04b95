/* Model files: HDF5 with one float32 dataset per tensor, named and shaped like the PyTorch state_dict
 * ("conv1.weight" [32,1,3,3], ...), so h5py + torch.load_state_dict read them directly.
 * Functions that can fail without dying return 0 or an errno value (EIO where HDF5 failed); the one that
 * allocates returns NULL when there is nothing. */
#ifndef MNIST_MODEL_FILE_H
#define MNIST_MODEL_FILE_H
#include <hdf5.h>

#include "nn/model.h"

/* Fails early (73, naming option and value) if path's directory cannot take the file, before hours of
 * training, and removes the temporaries of path that a killed writer of this host left behind. Collective. */
void model_file_check_writable(const char *option, const char *value, const char *path);
/* Written through an atomic_file (see atomic_file.h), sealed: a crash never leaves a file that looks complete,
 * and a damaged copy is refused before HDF5 parses it. Dies 74 when the write fails (disk full). Rank 0. */
void model_file_save(const char *path, model *m, int epoch, double test_accuracy);
/* Collective, before model_file_load: rank 0 checks the file's seal; every rank stops with 66 when it
 * is missing, 65 when it is damaged; a file without a seal (h5py, other tools) is loaded with a warning. */
void model_file_verify(const char *path);
/* Dies 66 if missing, 65 if it is damaged, not a model file or holds another model / other shapes. */
void model_file_load(const char *path, model *m);
/* Writes path as a sealed HDF5 file whose content fill(file, arg) makes (0, or EIO when HDF5 fails), built
 * in memory and written by us. 0, or an errno value (EIO: fill or HDF5 failed), with nothing left behind. */
int model_file_write_sealed(const char *path, int (*fill)(hid_t f, const void *arg), const void *arg);

/* The pieces of that layout, for files that hold more than a model (checkpoint.c). */
extern const char model_file_format[]; /* the "format" attribute --load-model expects */
/* A tensor from the flat buffer base at loc under its state_dict name; 0, or EIO. */
int model_file_write_tensor(hid_t loc, const tensor_desc *t, const float *base);
/* The tensor into base: 0, ENOENT (absent), EINVAL (another shape) or EIO (unreadable). */
int model_file_read_tensor(hid_t loc, const tensor_desc *t, float *base);
/* What model_file_read_tensor's error means, for a message: "is missing", ... */
const char *model_file_problem(int err);
/* Scalar attributes; writing returns 0, or EIO. Reading returns a malloc'd string, NULL if absent. */
int model_file_write_attr(hid_t loc, const char *name, hid_t type, const void *value);
int model_file_write_string_attr(hid_t loc, const char *name, const char *value);
char *model_file_read_string_attr(hid_t loc, const char *name);
#endif
