#include "fuzz_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"

enum { MAX_FDS = 1024 };
static jmp_buf on_exit_jump;

static void jump_back(int code) { longjmp(on_exit_jump, code + 1); /* 0 would mean "returned" */ }

/* Which descriptors below MAX_FDS are open now. */
static void open_fds(unsigned char open[MAX_FDS])
{
    memset(open, 0, MAX_FDS);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        int fd = atoi(e->d_name);
        if (fd >= 0 && fd < MAX_FDS && e->d_name[0] != '.')
            open[fd] = 1;
    }
    open[dirfd(d)] = 0;
    closedir(d);
}

/* Closes the HDF5 objects a death left open: objects in files first, then the files. (Dataspaces are not
 * in files; the few a death can leave are memory only.) */
static void close_h5_objects(void)
{
    static const unsigned kinds[] = {H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR, H5F_OBJ_FILE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, kinds[k]);
        if (n <= 0)
            continue;
        hid_t *ids = malloc((size_t)n * sizeof *ids);
        n = H5Fget_obj_ids(H5F_OBJ_ALL, kinds[k], (size_t)n, ids);
        for (ssize_t i = 0; i < n; i++)
            while (H5Iis_valid(ids[i]) > 0 && H5Idec_ref(ids[i]) > 0)
                ;
        free(ids);
    }
}

int fuzz_call(void (*fn)(void *), void *arg)
{
    static unsigned char before[MAX_FDS], after[MAX_FDS];
    open_fds(before);
    error_set_exit_hook(jump_back);
    int jumped = setjmp(on_exit_jump);
    if (!jumped) {
        fn(arg);
        error_set_exit_hook(NULL);
        return -1;
    }
    error_set_exit_hook(NULL);
    close_h5_objects();
    open_fds(after);
    for (int fd = 0; fd < MAX_FDS; fd++)
        if (after[fd] && !before[fd])
            close(fd);
    return jumped - 1;
}

static char scratch[4096];

static void remove_scratch(void)
{
    DIR *d = opendir(scratch);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(scratch);
}

const char *fuzz_scratch_dir(void)
{
    if (!scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/mnist-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch)) {
            perror(scratch);
            abort();
        }
        atexit(remove_scratch);
    }
    return scratch;
}

const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", fuzz_scratch_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0) {
        perror(path);
        abort();
    }
    return path;
}
