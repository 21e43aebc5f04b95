/* The pure decisions of the GPU path (src/gpu_plan.c), testable without a GPU: device index, why no GPU
 * is usable, duplicate-GPU detection from gathered PCI bus IDs, --bootstrap-addr parsing and its
 * precedence against NCCL_COMM_ID, the port probe (a real listener on 127.0.0.1), the bucket rule,
 * and the bandwidth formulas. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpu_plan.h"
#include "rng.h"
#include "check_run.h"

#define ck_assert_contains(hay, needle)                                                                   \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

START_TEST(test_device_index)
{
    ck_assert_int_eq(gpu_plan_device_index(0, 4), 0);
    ck_assert_int_eq(gpu_plan_device_index(3, 4), 3);
    ck_assert_int_eq(gpu_plan_device_index(5, 4), 1);
    /* Slurm binds one GPU per task: every rank sees one device, index 0. */
    for (int r = 0; r < 8; r++)
        ck_assert_int_eq(gpu_plan_device_index(r, 1), 0);
}
END_TEST

START_TEST(test_visible_devices)
{
    ck_assert_ptr_null(gpu_plan_visible_devices_hidden(NULL));
    ck_assert_ptr_null(gpu_plan_visible_devices_hidden("0,1"));
    ck_assert_ptr_null(gpu_plan_visible_devices_hidden("GPU-5f1c2f3e"));
    ck_assert_contains(gpu_plan_visible_devices_hidden(""), "empty");
    ck_assert_contains(gpu_plan_visible_devices_hidden("  "), "empty");
    ck_assert_contains(gpu_plan_visible_devices_hidden("NoDevFiles"), "NoDevFiles");
    ck_assert_contains(gpu_plan_visible_devices_hidden("-1"), "negative");
    char buf[16];
    gpu_plan_visible_devices_show(NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "(unset)");
    gpu_plan_visible_devices_show("0,1", buf, sizeof buf);
    ck_assert_str_eq(buf, "0,1");
    gpu_plan_visible_devices_show("0,1,2,3,4,5,6,7,8,9", buf, sizeof buf);
    ck_assert_str_eq(buf, "0,1,2,3,4,5,...");
}
END_TEST

START_TEST(test_usable)
{
    char why[GPU_MSG_LEN];
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_OK, 2, 13000, 13000, NULL, "", why, sizeof why), 1);
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_INSUFFICIENT_DRIVER, 0, 0, 13000, NULL, "", why, sizeof why), 0);
    ck_assert_contains(why, "no NVIDIA driver");
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_INSUFFICIENT_DRIVER, 0, 12020, 13000, NULL, "", why, sizeof why), 0);
    ck_assert_contains(why, "CUDA 12.2");
    ck_assert_contains(why, "CUDA 13.0 runtime");
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_NO_DEVICE, 0, 13000, 13000, "", "", why, sizeof why), 0);
    ck_assert_contains(why, "CUDA_VISIBLE_DEVICES is set but empty");
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_NO_DEVICE, 0, 13000, 13000, NULL, "", why, sizeof why), 0);
    ck_assert_contains(why, "no CUDA device found");
    ck_assert_contains(why, "(unset)");
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_OK, 0, 13000, 13000, "3", "", why, sizeof why), 0);
    ck_assert_contains(why, "no CUDA device found");
    ck_assert_int_eq(gpu_plan_usable(GPU_PROBE_OTHER, 0, 13000, 13000, NULL, "cudaErrorUnknown (boom)", why,
                                     sizeof why), 0);
    ck_assert_contains(why, "cudaErrorUnknown (boom)");
}
END_TEST

static gpu_slot slot(int rank, int visible, int device, const char *bus, const char *cvd)
{
    gpu_slot s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    s.local_rank = rank % 8;
    s.visible = visible;
    s.device = device;
    snprintf(s.bus_id, sizeof s.bus_id, "%s", bus);
    snprintf(s.visible_devices, sizeof s.visible_devices, "%s", cvd);
    return s;
}

START_TEST(test_node_ok)
{
    char msg[GPU_MSG_LEN];
    /* Every rank sees all four GPUs and takes its own. */
    gpu_slot all[4] = {slot(0, 4, 0, "0000:07:00.0", "(unset)"), slot(1, 4, 1, "0000:0F:00.0", "(unset)"),
                       slot(2, 4, 2, "0000:47:00.0", "(unset)"), slot(3, 4, 3, "0000:4E:00.0", "(unset)")};
    ck_assert_int_eq(gpu_plan_check_node(all, 4, "gpu01", msg, sizeof msg), GPU_NODE_OK);
    ck_assert_str_eq(msg, "");
    /* --gpus-per-task=1: every rank sees one GPU, a different one. */
    gpu_slot bound[4] = {slot(4, 1, 0, "0000:07:00.0", "0"), slot(5, 1, 0, "0000:0F:00.0", "1"),
                         slot(6, 1, 0, "0000:47:00.0", "2"), slot(7, 1, 0, "0000:4E:00.0", "3")};
    ck_assert_int_eq(gpu_plan_check_node(bound, 4, "gpu02", msg, sizeof msg), GPU_NODE_OK);
    ck_assert_int_eq(gpu_plan_check_node(bound, 1, "gpu02", msg, sizeof msg), GPU_NODE_OK);
}
END_TEST

START_TEST(test_node_oversubscribed)
{
    char msg[GPU_MSG_LEN];
    /* Four ranks, two GPUs, everyone sees both: ranks 0 and 2 collide. */
    gpu_slot s[4] = {slot(8, 2, 0, "0000:07:00.0", "0,1"), slot(9, 2, 1, "0000:0F:00.0", "0,1"),
                     slot(10, 2, 0, "0000:07:00.0", "0,1"), slot(11, 2, 1, "0000:0F:00.0", "0,1")};
    ck_assert_int_eq(gpu_plan_check_node(s, 4, "gpu03", msg, sizeof msg), GPU_NODE_OVERSUBSCRIBED);
    ck_assert_contains(msg, "4 ranks on gpu03 but only 2 GPUs");
    ck_assert_contains(msg, "ranks 8 and 10");
    ck_assert_contains(msg, "0000:07:00.0");
    ck_assert_contains(msg, "--ntasks-per-node=2");
    ck_assert_contains(msg, "--gpus-per-node=2");
    ck_assert_contains(msg, "CUDA_VISIBLE_DEVICES=0,1");
    /* One GPU for two ranks. */
    gpu_slot one[2] = {slot(0, 1, 0, "0000:07:00.0", "(unset)"), slot(1, 1, 0, "0000:07:00.0", "(unset)")};
    ck_assert_int_eq(gpu_plan_check_node(one, 2, "gpu04", msg, sizeof msg), GPU_NODE_OVERSUBSCRIBED);
    ck_assert_contains(msg, "only 1 GPU visible");
}
END_TEST

START_TEST(test_node_shared)
{
    char msg[GPU_MSG_LEN];
    /* Rank 1 was pinned by hand to the GPU rank 0 takes anyway; bus IDs differ in case only. */
    gpu_slot s[2] = {slot(1, 1, 0, "0000:3b:00.0", "0"), slot(0, 2, 0, "0000:3B:00.0", "(unset)")};
    ck_assert_int_eq(gpu_plan_check_node(s, 2, "gpu05", msg, sizeof msg), GPU_NODE_SHARED);
    ck_assert_contains(msg, "ranks 0 and 1 on gpu05 would share GPU");
    ck_assert_contains(msg, "--gpus-per-task=1");
    ck_assert_contains(msg, "rank 0: device 0 of 2 visible, CUDA_VISIBLE_DEVICES=(unset)");
    ck_assert_contains(msg, "rank 1: device 0 of 1 visible, CUDA_VISIBLE_DEVICES=0");
}
END_TEST

START_TEST(test_hostport)
{
    char host[64];
    int port = 0;
    const char *err = NULL;
    ck_assert_int_eq(gpu_plan_parse_hostport("node01:29500", host, sizeof host, &port, &err), 0);
    ck_assert_str_eq(host, "node01");
    ck_assert_int_eq(port, 29500);
    ck_assert_int_eq(gpu_plan_parse_hostport("10.1.2.3:1", host, sizeof host, &port, &err), 0);
    ck_assert_str_eq(host, "10.1.2.3");
    ck_assert_int_eq(port, 1);
    ck_assert_int_eq(gpu_plan_parse_hostport("[fe80::1]:65535", host, sizeof host, &port, &err), 0);
    ck_assert_str_eq(host, "fe80::1");
    ck_assert_int_eq(port, 65535);
    static const char *const bad[] = {"", "node01", ":29500", "node01:", "node01:0", "node01:65536",
                                      "node01:12a", "node01:-5", "fe80::1:29500", "[fe80::1]29500", "[]:29500",
                                      "node01:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err = NULL;
        ck_assert_msg(gpu_plan_parse_hostport(bad[i], host, sizeof host, &port, &err) == -1, "accepted '%s'", bad[i]);
        ck_assert_ptr_nonnull(err);
    }
    char tiny[4];
    ck_assert_int_eq(gpu_plan_parse_hostport("node01:29500", tiny, sizeof tiny, &port, &err), -1);
    ck_assert_contains(err, "too long");
}
END_TEST

START_TEST(test_comm_id_precedence)
{
    char line[GPU_MSG_LEN];
    gpu_comm_id_plan p = gpu_plan_comm_id(NULL, NULL);
    ck_assert_int_eq(p.source, GPU_COMM_ID_AUTO);
    ck_assert_ptr_null(p.addr);
    gpu_plan_comm_id_describe(&p, NULL, line, sizeof line);
    ck_assert_contains(line, "NCCL chooses");

    p = gpu_plan_comm_id("node01:29500", NULL);
    ck_assert_int_eq(p.source, GPU_COMM_ID_OPTION);
    ck_assert_str_eq(p.addr, "node01:29500");
    ck_assert_int_eq(p.overridden, 0);
    gpu_plan_comm_id_describe(&p, "node01:29500", line, sizeof line);
    ck_assert_contains(line, "rank 0 listens on node01:29500 (--bootstrap-addr");

    p = gpu_plan_comm_id("node01:29500", ""); /* an empty NCCL_COMM_ID counts as unset */
    ck_assert_int_eq(p.source, GPU_COMM_ID_OPTION);

    p = gpu_plan_comm_id("node01:29500", "10.0.0.7:31000"); /* the user's environment wins */
    ck_assert_int_eq(p.source, GPU_COMM_ID_ENV);
    ck_assert_str_eq(p.addr, "10.0.0.7:31000");
    ck_assert_int_eq(p.overridden, 1);
    gpu_plan_comm_id_describe(&p, "node01:29500", line, sizeof line);
    ck_assert_contains(line, "10.0.0.7:31000 from NCCL_COMM_ID");
    ck_assert_contains(line, "precedence over --bootstrap-addr node01:29500");

    p = gpu_plan_comm_id(NULL, "10.0.0.7:31000");
    ck_assert_int_eq(p.source, GPU_COMM_ID_ENV);
    ck_assert_int_eq(p.overridden, 0);
    gpu_plan_comm_id_describe(&p, NULL, line, sizeof line);
    ck_assert_contains(line, "NCCL_COMM_ID from the environment");
}
END_TEST

/* A TCP listener on 127.0.0.1 with an ephemeral port; returns the fd and the port. */
static int listen_local(int reuseport, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    int one = 1;
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
#ifdef SO_REUSEPORT
    if (reuseport)
        ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one), 0);
#else
    (void)reuseport;
#endif
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

START_TEST(test_probe_port)
{
    char msg[GPU_MSG_LEN];
    int port;
    /* _i == 1: the listener uses SO_REUSEADDR|SO_REUSEPORT like NCCL's own bootstrap root (another job's),
     * which NCCL itself would happily share; the probe must still see it. */
    int fd = listen_local(_i, &port);
    ck_assert_int_eq(gpu_plan_probe_port("127.0.0.1", port, msg, sizeof msg), EADDRINUSE);
    ck_assert_contains(msg, "is in use");
    close(fd);
    /* Closed (never connected: no TIME_WAIT): free again. */
    ck_assert_int_eq(gpu_plan_probe_port("127.0.0.1", port, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "");
}
END_TEST

START_TEST(test_probe_not_local)
{
    char msg[GPU_MSG_LEN], flag[8] = "0";
    FILE *f = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
    if (f) {
        if (!fgets(flag, sizeof flag, f))
            flag[0] = '0';
        fclose(f);
    }
    if (flag[0] != '0')
        return; /* this kernel lets anyone bind foreign addresses: nothing to detect */
    /* 192.0.2.1 (TEST-NET-1) is no address of this machine: rank 0 would not be where HOST says. */
    ck_assert_int_eq(gpu_plan_probe_port("192.0.2.1", 29500, msg, sizeof msg), EADDRNOTAVAIL);
    ck_assert_contains(msg, "is not an address of");
    ck_assert_contains(msg, "rank 0");
}
END_TEST

/* Applies a sequence of ready ranges and the flush; returns the started ranges in order. */
typedef struct {
    size_t start, count;
} range;

static int run_plan(size_t n, size_t bucket, const range *ready, int nready, range *out)
{
    gpu_bucket_plan b;
    gpu_bucket_init(&b, n, bucket);
    int k = 0;
    for (int i = 0; i < nready; i++) {
        size_t s[2], c[2];
        int m = gpu_bucket_ready(&b, ready[i].start, ready[i].count, s, c);
        ck_assert_int_le(m, 2);
        for (int j = 0; j < m; j++)
            out[k++] = (range){s[j], c[j]};
    }
    size_t s, c;
    if (gpu_bucket_flush(&b, &s, &c))
        out[k++] = (range){s, c};
    ck_assert_int_eq(gpu_bucket_flush(&b, &s, &c), 0);
    return k;
}

START_TEST(test_buckets_fixed)
{
    range out[16];
    /* Back to front, adjacent: a bucket starts once it holds 30 floats. */
    const range a[] = {{90, 10}, {70, 20}, {50, 20}, {0, 50}};
    ck_assert_int_eq(run_plan(100, 30, a, 4, out), 2);
    ck_assert_uint_eq(out[0].start, 70);
    ck_assert_uint_eq(out[0].count, 30);
    ck_assert_uint_eq(out[1].start, 0);
    ck_assert_uint_eq(out[1].count, 70);
    /* A gap (70..90 not reported yet): the pending range starts, a new one begins; the flush sends the rest. */
    const range b[] = {{90, 10}, {50, 20}, {70, 20}, {0, 50}};
    int k = run_plan(100, 1000, b, 4, out);
    ck_assert_int_eq(k, 4);
    ck_assert_uint_eq(out[0].start, 90);
    ck_assert_uint_eq(out[1].start, 50);
    ck_assert_uint_eq(out[1].count, 20);
    ck_assert_uint_eq(out[2].start, 70);
    ck_assert_uint_eq(out[2].count, 20);
    ck_assert_uint_eq(out[3].start, 0);
    ck_assert_uint_eq(out[3].count, 50);
    /* bucket 0: every range starts at once; empty ranges start nothing. */
    const range c[] = {{90, 10}, {90, 0}, {0, 90}};
    ck_assert_int_eq(run_plan(100, 0, c, 3, out), 2);
    ck_assert_uint_eq(out[0].count, 10);
    ck_assert_uint_eq(out[1].count, 90);
    /* One bucket larger than the model: a single all-reduce at the flush. */
    const range d[] = {{60, 40}, {20, 40}, {0, 20}};
    ck_assert_int_eq(run_plan(100, 1u << 30, d, 3, out), 1);
    ck_assert_uint_eq(out[0].start, 0);
    ck_assert_uint_eq(out[0].count, 100);
}
END_TEST

/* Random layer sizes, random order perturbations, random bucket sizes: every gradient is reduced exactly
 * once, which is what the GPU test checks numerically. */
START_TEST(test_buckets_cover_once)
{
    enum { N = 5000, MAXL = 64 };
    static unsigned char hits[N];
    range layers[MAXL], out[4 * MAXL];
    for (uint64_t trial = 0; trial < 300; trial++) {
        uint64_t key = rng_key(42, trial);
        int nl = 1 + (int)(rng_uniform(key, 0) * (MAXL - 1));
        /* Cut [0, N) into nl layers. */
        size_t cut[MAXL + 1];
        cut[0] = 0;
        cut[nl] = N;
        for (int i = 1; i < nl; i++)
            cut[i] = (size_t)(rng_uniform(key, (uint64_t)i) * N);
        for (int i = 1; i < nl; i++) /* insertion sort */
            for (int j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
                size_t t = cut[j];
                cut[j] = cut[j - 1];
                cut[j - 1] = t;
            }
        for (int i = 0; i < nl; i++) /* back to front */
            layers[i] = (range){cut[nl - 1 - i], cut[nl - i] - cut[nl - 1 - i]};
        if (nl > 2 && rng_uniform(key, 1000) < 0.5) { /* a layer reported late */
            range t = layers[1];
            layers[1] = layers[2];
            layers[2] = t;
        }
        size_t bucket = (size_t)(rng_uniform(key, 2000) * 2 * N / (1 + trial % 7));
        int k = run_plan(N, bucket, layers, nl, out);
        memset(hits, 0, sizeof hits);
        for (int i = 0; i < k; i++) {
            ck_assert_uint_gt(out[i].count, 0);
            ck_assert_uint_le(out[i].start + out[i].count, N);
            for (size_t e = out[i].start; e < out[i].start + out[i].count; e++)
                hits[e]++;
        }
        size_t bad = N;
        for (size_t e = 0; e < N && bad == N; e++)
            if (hits[e] != 1)
                bad = e;
        ck_assert_msg(bad == N, "trial %llu: element %zu reduced %d times", (unsigned long long)trial, bad,
                      bad < N ? hits[bad] : 1);
    }
}
END_TEST

START_TEST(test_figures)
{
    ck_assert_double_eq_tol(gpu_plan_algbw(1e9, 0.5), 2e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 2), 1e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 8), 1.75e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 1), 0, 1e-9);
    ck_assert_double_eq_tol(gpu_plan_hidden_fraction(0.25e-3, 1e-3), 0.75, 1e-12);
    ck_assert_double_eq_tol(gpu_plan_hidden_fraction(2e-3, 1e-3), 0, 1e-12);
    ck_assert_double_eq_tol(gpu_plan_hidden_fraction(0, 0), 0, 1e-12);
    char buf[32];
    gpu_plan_nccl_version_string(22809, buf, sizeof buf);
    ck_assert_str_eq(buf, "2.28.9");
    gpu_plan_nccl_version_string(21903, buf, sizeof buf);
    ck_assert_str_eq(buf, "2.19.3");
    gpu_plan_nccl_version_string(2708, buf, sizeof buf);
    ck_assert_str_eq(buf, "2.7.8");
    gpu_plan_cuda_version_string(13000, buf, sizeof buf);
    ck_assert_str_eq(buf, "13.0");
    gpu_plan_cuda_version_string(12040, buf, sizeof buf);
    ck_assert_str_eq(buf, "12.4");
    gpu_plan_cuda_version_string(0, buf, sizeof buf);
    ck_assert_str_eq(buf, "none");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_plan");
    TCase *tc = tcase_create("gpu_plan");
    tcase_add_test(tc, test_device_index);
    tcase_add_test(tc, test_visible_devices);
    tcase_add_test(tc, test_usable);
    tcase_add_test(tc, test_node_ok);
    tcase_add_test(tc, test_node_oversubscribed);
    tcase_add_test(tc, test_node_shared);
    tcase_add_test(tc, test_hostport);
    tcase_add_test(tc, test_comm_id_precedence);
    tcase_add_loop_test(tc, test_probe_port, 0, 2);
    tcase_add_test(tc, test_probe_not_local);
    tcase_add_test(tc, test_buckets_fixed);
    tcase_add_test(tc, test_buckets_cover_once);
    tcase_add_test(tc, test_figures);
    suite_add_tcase(s, tc);
    return check_run(s);
}
