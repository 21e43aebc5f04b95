#include "data/h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

/* H5Pset_file_locking: HDF5 1.10.7+ and 1.12.1+. */
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
#define H5UTIL_HAVE_FILE_LOCKING 1
#endif

/* ---------------------------------------------------------------- errors */

void h5_quiet(void)
{
    static int done;
    if (!done) {
        if (H5open() < 0)
            die(EX_SOFTWARE, "cannot initialise the HDF5 library");
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

static int contains_nocase(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (; s && *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && (s[i] | 0x20) == (word[i] | 0x20))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

static herr_t h5_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    h5_error *w = data;
    if (contains_nocase(e->desc, "fletcher") || contains_nocase(e->func_name, "fletcher"))
        w->fletcher = 1;
    if (n == 0)
        snprintf(w->desc, sizeof w->desc, "%s", e->desc ? e->desc : "unknown HDF5 error");
    return 0;
}

h5_error h5_last_error(void)
{
    h5_error w;
    memset(&w, 0, sizeof w);
    snprintf(w.desc, sizeof w.desc, "unknown HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk, &w);
    H5Eclear2(H5E_DEFAULT);
    return w;
}

const char *h5_msg(void)
{
    static char buf[200];
    h5_error w = h5_last_error();
    snprintf(buf, sizeof buf, "%s", w.desc);
    return buf;
}

hid_t h5_file_access(int locking)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef H5UTIL_HAVE_FILE_LOCKING
    H5Pset_file_locking(fapl, locking ? 1 : 0, 1);
#else
    (void)locking;
#endif
    return fapl;
}

/* ---------------------------------------------------------------- attributes */

int h5_write_attr(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *value)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, mem_type, value) >= 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

int h5_write_str_attr(hid_t loc, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, H5T_CSET_ASCII);
    int rc = h5_write_attr(loc, name, t, t, value);
    H5Tclose(t);
    return rc;
}

int h5_read_u64_attr(const char *what, hid_t loc, const char *name, uint64_t *v)
{
    htri_t ex = H5Aexists(loc, name);
    if (ex < 0)
        die(EX_DATAERR, "%s: cannot look up attribute %s: %s", what, name, h5_msg());
    if (!ex)
        return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    hid_t sp = a < 0 ? -1 : H5Aget_space(a);
    if (a < 0 || t < 0 || sp < 0)
        die(EX_DATAERR, "%s: cannot open attribute %s: %s", what, name, h5_msg());
    if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1)
        die(EX_DATAERR, "%s: attribute %s is not a single integer", what, name);
    if (H5Tget_sign(t) != H5T_SGN_NONE) {
        int64_t sv;
        if (H5Aread(a, H5T_NATIVE_INT64, &sv) < 0)
            die(EX_DATAERR, "%s: cannot read attribute %s: %s", what, name, h5_msg());
        if (sv < 0)
            die(EX_DATAERR, "%s: attribute %s is negative (%lld)", what, name, (long long)sv);
        *v = (uint64_t)sv;
    } else if (H5Aread(a, H5T_NATIVE_UINT64, v) < 0) {
        die(EX_DATAERR, "%s: cannot read attribute %s: %s", what, name, h5_msg());
    }
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return 1;
}

int h5_read_str_attr(const char *what, hid_t loc, const char *name, char *buf, size_t len)
{
    htri_t ex = H5Aexists(loc, name);
    if (ex <= 0)
        return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    if (a < 0 || t < 0 || H5Tget_class(t) != H5T_STRING)
        die(EX_DATAERR, "%s: attribute %s is not a string", what, name);
    hid_t mt = H5Tcopy(H5T_C_S1);
    int ok;
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        H5Tset_size(mt, H5T_VARIABLE);
        ok = H5Aread(a, mt, &s) >= 0;
        snprintf(buf, len, "%s", ok && s ? s : "");
        if (s)
            H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(t);
        char *tmp = xcalloc(sz + 1, 1);
        H5Tset_size(mt, sz + 1);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        ok = H5Aread(a, mt, tmp) >= 0;
        snprintf(buf, len, "%s", tmp);
        free(tmp);
    }
    if (!ok)
        die(EX_DATAERR, "%s: cannot read attribute %s: %s", what, name, h5_msg());
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    return 1;
}

/* ---------------------------------------------------------------- datasets */

hid_t h5_open_dataset(const char *what, hid_t file, const char *name)
{
    htri_t ex = H5Lexists(file, name, H5P_DEFAULT);
    if (ex <= 0)
        die(EX_DATAERR, "%s has no /%s dataset", what, name);
    hid_t o = H5Oopen(file, name, H5P_DEFAULT);
    if (o < 0 || H5Iget_type(o) != H5I_DATASET)
        die(EX_DATAERR, "%s: /%s is not a dataset", what, name);
    H5Oclose(o);
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0)
        die(EX_DATAERR, "%s: cannot open /%s: %s", what, name, h5_msg());
    return d;
}

static void describe_type(hid_t t, char *buf, size_t len)
{
    H5T_class_t c = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", size * 8);
        break;
    case H5T_FLOAT:
        snprintf(buf, len, "float%zu", size * 8);
        break;
    case H5T_STRING:
        snprintf(buf, len, "string");
        break;
    case H5T_COMPOUND:
        snprintf(buf, len, "compound");
        break;
    default:
        snprintf(buf, len, "HDF5 type class %d", (int)c);
        break;
    }
}

void h5_check_uint8(const char *what, hid_t d, const char *name)
{
    hid_t t = H5Dget_type(d);
    if (t < 0)
        die(EX_DATAERR, "%s: cannot read the type of /%s: %s", what, name, h5_msg());
    int ok = H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1 && H5Tget_sign(t) == H5T_SGN_NONE;
    if (!ok) {
        char type[64];
        describe_type(t, type, sizeof type);
        H5Tclose(t);
        die(EX_DATAERR, "%s: /%s has type %s, expected uint8", what, name, type);
    }
    H5Tclose(t);
}

int h5_dims(hid_t d, hsize_t dims[8])
{
    hid_t sp = H5Dget_space(d);
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (nd > 8)
        nd = -1;
    if (nd > 0)
        H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0)
        H5Sclose(sp);
    return nd;
}

void h5_shape_str(const hsize_t *dims, int nd, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < nd && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}
