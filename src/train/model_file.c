#include "train/model_file.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "data/h5util.h"
#include "comm/world.h"

const char model_file_format[] = "mnist_ddp state_dict 1";

void model_file_check_writable(const char *option, const char *value, const char *path)
{
    int err = 0;
    if (world_rank() == 0) {
        /* The probe is the temporary the real write will make: the same directory, flags and name. The rename
         * at the end would fail on a directory of that name. */
        atomic_file a;
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            err = EISDIR;
        else if ((err = af_open(&a, path)) == 0) {
            af_abort(&a);
            af_remove_stale(path);
        }
    }
    world_verdict(&err, sizeof err);
    if (err)
        die_all(EX_CANTCREAT, "%s %s: cannot create a file there: %s", option, value, strerror(err));
}

/* fill's file built in memory (HDF5's core driver, nothing on disk): its image, malloc'd, or NULL. HDF5
 * never writes to the disk itself, so a full disk is an ordinary write error of ours, with its errno, not
 * a failed H5Fclose (after which HDF5 1.10 crashes at exit). Nor does HDF5 open a name in a shared
 * directory. */
static void *hdf5_image(int (*fill)(hid_t f, const void *arg), const void *arg, size_t *len)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t f = fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0
                  ? -1
                  : H5Fcreate("mnist_ddp-image", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    void *image = NULL;
    ssize_t n = -1;
    if (f >= 0 && fill(f, arg) == 0 && H5Fflush(f, H5F_SCOPE_LOCAL) >= 0 && (n = H5Fget_file_image(f, NULL, 0)) > 0) {
        image = xmalloc((size_t)n);
        if (H5Fget_file_image(f, image, (size_t)n) != n) {
            free(image);
            image = NULL;
        }
    }
    if (f >= 0)
        H5Fclose(f);
    if (fapl >= 0)
        H5Pclose(fapl);
    *len = image ? (size_t)n : 0;
    return image;
}

int model_file_write_sealed(const char *path, int (*fill)(hid_t f, const void *arg), const void *arg)
{
    size_t len;
    void *image = hdf5_image(fill, arg, &len);
    if (!image)
        return EIO;
    atomic_file a;
    int err = af_open(&a, path);
    if (!err && (err = af_write_sealed(&a, image, len)) != 0)
        af_abort(&a);
    else if (!err)
        err = af_commit(&a);
    free(image);
    return err;
}

int model_file_write_attr(hid_t loc, const char *name, hid_t type, const void *value)
{
    return h5_write_attr(loc, name, type, type, value) < 0 ? EIO : 0;
}

int model_file_write_string_attr(hid_t loc, const char *name, const char *value)
{
    return h5_write_str_attr(loc, name, value) < 0 ? EIO : 0;
}

/* One tensor as a dataset of its shape; PyTorch's num_batches_tracked is an int64 scalar. */
int model_file_write_tensor(hid_t file, const tensor_desc *t, const float *base)
{
    hsize_t dims[4];
    for (int d = 0; d < t->ndim; d++)
        dims[d] = (hsize_t)t->shape[d];
    int is_count = strstr(t->name, "num_batches_tracked") != NULL;
    hid_t space = is_count ? H5Screate(H5S_SCALAR) : H5Screate_simple(t->ndim, dims, NULL);
    hid_t type = is_count ? H5T_STD_I64LE : H5T_IEEE_F32LE;
    hid_t d = H5Dcreate2(file, t->name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = -1;
    if (d >= 0) {
        if (is_count) {
            long long v = (long long)base[t->offset];
            rc = H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
        } else {
            rc = H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, base + t->offset);
        }
        H5Dclose(d);
    }
    H5Sclose(space);
    return rc < 0 ? EIO : 0;
}

typedef struct {
    model *m;
    int epoch;
    double test_accuracy;
} model_file;

static int fill_model(hid_t f, const void *arg)
{
    const model_file *mf = arg;
    model *m = mf->m;
    int bad = 0;
    float *params = xmalloc(model_num_params(m) * sizeof *params);
    float *bufs = xmalloc((model_buffer_size(m) + 1) * sizeof *bufs);
    model_download(m, params, bufs);
    for (int i = 0; i < model_num_tensors(m) && !bad; i++)
        bad = model_file_write_tensor(f, model_tensor(m, i), params);
    for (int i = 0; i < model_num_buffers(m) && !bad; i++)
        bad = model_file_write_tensor(f, model_buffer(m, i), bufs);
    free(params);
    free(bufs);
    if (bad || model_file_write_string_attr(f, "format", model_file_format) ||
        model_file_write_string_attr(f, "model", model_name(m)) ||
        model_file_write_attr(f, "epoch", H5T_NATIVE_INT, &mf->epoch) ||
        model_file_write_attr(f, "test_accuracy", H5T_NATIVE_DOUBLE, &mf->test_accuracy))
        return EIO;
    return 0;
}

void model_file_save(const char *path, model *m, int epoch, double test_accuracy)
{
    model_file mf = {m, epoch, test_accuracy};
    int err = model_file_write_sealed(path, fill_model, &mf);
    if (err)
        die(EX_IOERR, "--save-model %s: writing it failed: %s", path, strerror(err));
}

char *model_file_read_string_attr(hid_t loc, const char *name)
{
    if (H5Aexists(loc, name) <= 0)
        return NULL;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    char *s = NULL;
    if (H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t n = H5Tget_size(t);
        s = xcalloc(n + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        if (H5Aread(a, mt, s) < 0)
            s[0] = 0;
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return s;
}

const char *model_file_problem(int err)
{
    return err == ENOENT ? "is missing" : err == EINVAL ? "has another shape than this model's" : "cannot be read";
}

int model_file_read_tensor(hid_t f, const tensor_desc *t, float *base)
{
    if (H5Lexists(f, t->name, H5P_DEFAULT) <= 0)
        return ENOENT;
    hid_t d = H5Dopen2(f, t->name, H5P_DEFAULT);
    if (d < 0)
        return EIO;
    int is_count = strstr(t->name, "num_batches_tracked") != NULL;
    hsize_t dims[8] = {0};
    int ndim = h5_dims(d, dims);
    int ok = is_count ? ndim == 0 : ndim == t->ndim;
    for (int i = 0; ok && !is_count && i < ndim; i++)
        ok = dims[i] == (hsize_t)t->shape[i];
    if (!ok) {
        H5Dclose(d);
        return EINVAL;
    }
    herr_t rc;
    if (is_count) {
        long long v = 0;
        rc = H5Dread(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
        base[t->offset] = (float)v;
    } else {
        rc = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, base + t->offset);
    }
    H5Dclose(d);
    return rc < 0 ? EIO : 0;
}

static void read_tensor(hid_t f, const char *path, const tensor_desc *t, float *base)
{
    int err = model_file_read_tensor(f, t, base);
    if (err)
        die(EX_DATAERR, "--load-model %s: tensor '%s' %s", path, t->name, model_file_problem(err));
}

void model_file_load(const char *path, model *m)
{
    char why[512];
    if (access(path, R_OK) != 0)
        die(EX_NOINPUT, "--load-model %s: %s", path, strerror(errno));
    if (af_verify(path, why, sizeof why) == AF_BAD)
        die(EX_DATAERR, "--load-model %s: %s", path, why);
    if (H5Fis_hdf5(path) <= 0)
        die(EX_DATAERR, "--load-model %s: not an HDF5 file", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        die(EX_DATAERR, "--load-model %s: cannot open as HDF5", path);
    char *fmt = model_file_read_string_attr(f, "format"), *name = model_file_read_string_attr(f, "model");
    if (!fmt || strcmp(fmt, model_file_format) != 0 || !name)
        die(EX_DATAERR, "--load-model %s: not a model file written by mnist_ddp --save-model", path);
    if (strcmp(name, model_name(m)) != 0)
        die(EX_DATAERR, "--load-model %s: holds model '%s', but this run trains '%s' (use --model %s)", path, name,
            model_name(m), name);
    float *params = xmalloc(model_num_params(m) * sizeof *params);
    float *bufs = xmalloc((model_buffer_size(m) + 1) * sizeof *bufs);
    for (int i = 0; i < model_num_tensors(m); i++)
        read_tensor(f, path, model_tensor(m, i), params);
    for (int i = 0; i < model_num_buffers(m); i++)
        read_tensor(f, path, model_buffer(m, i), bufs);
    model_upload(m, params, bufs);
    free(params);
    free(bufs);
    free(fmt);
    free(name);
    H5Fclose(f);
}

void model_file_verify(const char *path)
{
    struct {
        int code, rc;
        char why[512];
    } v = {0, AF_SEALED, ""};
    if (world_rank() == 0) {
        if (access(path, R_OK) != 0) {
            v.code = EX_NOINPUT;
            snprintf(v.why, sizeof v.why, "%s", strerror(errno));
        } else if ((v.rc = af_verify(path, v.why, sizeof v.why)) == AF_BAD) {
            v.code = EX_DATAERR;
        } else if (v.rc == AF_UNSEALED) {
            warn("--load-model %s: no mnist_ddp checksum header (written by another tool?): only HDF5's own "
                 "checks apply",
                 path);
        }
    }
    world_verdict(&v, sizeof v);
    if (v.code)
        die_all(v.code, "--load-model %s: %s", path, v.why);
}
