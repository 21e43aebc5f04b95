/* HDF5 helpers shared by the shard files (src/shard_*.c) and the model files (src/train/model_file.c):
 * HDF5 error capture (our own one-line messages instead of HDF5's stack dumps), scalar attributes,
 * and dataset checks.
 *
 * The helpers that take `what` die EX_DATAERR with one line "<what>: <problem>" (or "<what> has no
 * /<name> dataset"), so the caller names the file in its own words, e.g. "shard '/d/x.h5'". */
#ifndef MNIST_H5UTIL_H
#define MNIST_H5UTIL_H
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* Initialise the HDF5 library (once) and turn off its automatic error-stack printing. */
void h5_quiet(void);

/* The innermost message of the current HDF5 error stack, and whether a Fletcher-32 checksum
 * failed anywhere on it; the stack is cleared. */
typedef struct {
    char desc[200];
    int fletcher;
} h5_error;
h5_error h5_last_error(void);
/* Just the message, in a static buffer (valid until the next call). */
const char *h5_msg(void);

/* File access properties (close with H5Pclose) with HDF5 file locking on or off, where the library
 * can choose (1.10.7+, 1.12.1+); ignored where the file system cannot lock. */
hid_t h5_file_access(int locking);

/* A scalar attribute `name` on loc, stored as file_type from *value of mem_type. 0, or -1. */
int h5_write_attr(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *value);
/* A fixed-length, NUL-terminated ASCII string attribute. 0, or -1. */
int h5_write_str_attr(hid_t loc, const char *name, const char *value);

/* A scalar integer attribute (any integer type; a negative value is an error): 1, or 0 if absent. */
int h5_read_u64_attr(const char *what, hid_t loc, const char *name, uint64_t *v);
/* A string attribute, fixed or variable length, into buf (truncated to len): 1, or 0 if absent. */
int h5_read_str_attr(const char *what, hid_t loc, const char *name, char *buf, size_t len);

/* Dataset `name` of file, opened; dies if it is missing or not a dataset. */
hid_t h5_open_dataset(const char *what, hid_t file, const char *name);
/* Dies unless dataset d (called name in the message) holds uint8, naming the type it holds. */
void h5_check_uint8(const char *what, hid_t d, const char *name);
/* The rank of dataset d and its dimensions; -1 if the shape cannot be read or has more than 8. */
int h5_dims(hid_t d, hsize_t dims[8]);
/* "[d0,d1,...]" into buf. */
void h5_shape_str(const hsize_t *dims, int nd, char *buf, size_t len);
#endif
