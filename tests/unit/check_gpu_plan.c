/* The pure decisions of the GPU path (src/gpu/gpu_plan.c), testable without a GPU: device index, why no GPU
 * is usable, duplicate-GPU detection from gathered PCI bus IDs, --bootstrap-addr parsing and its
 * precedence against NCCL_COMM_ID, the port probe (a real listener on 127.0.0.1) and the bandwidth
 * formulas. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include "../check_run.h"
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpu/gpu_plan.h"

#define ck_assert_contains(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

START_TEST(test_device_index)
{
    ck_assert_int_eq(gpu_plan_device_index(0, 4), 0);
    ck_assert_int_eq(gpu_plan_device_index(3, 4), 3);
    ck_assert_int_eq(gpu_plan_device_index(5, 4), 1);
    /* Slurm binds one GPU per task: every rank sees one device, index 0. */
    for (int r = 0; r < 8; r++)
        ck_assert_int_eq(gpu_plan_device_index(r, 1), 0);
    /* Outside the contract (no device seen, a local rank unknown): device 0, not a division by zero or -1. */
    ck_assert_int_eq(gpu_plan_device_index(3, 0), 0);
    ck_assert_int_eq(gpu_plan_device_index(-1, 4), 0);
    ck_assert_int_eq(gpu_plan_device_index(-5, 4), 0);
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
    ck_assert_int_eq(
        gpu_plan_usable(GPU_PROBE_OTHER, 0, 13000, 13000, NULL, "cudaErrorUnknown (boom)", why, sizeof why), 0);
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

/* The edges of the node check: the pair named is the one with the lowest ranks whatever the slots' order;
 * as many ranks as visible GPUs is not oversubscribed (a tie of n > visible); equal counts but different
 * CUDA_VISIBLE_DEVICES strings are different views. */
START_TEST(test_node_edges)
{
    char msg[GPU_MSG_LEN];
    /* Higher ranks gathered first: ranks 5 and 6 share one GPU, ranks 2 and 3 another. */
    gpu_slot late[4] = {slot(5, 4, 0, "0000:07:00.0", "(unset)"), slot(6, 4, 0, "0000:07:00.0", "(unset)"),
                        slot(2, 4, 1, "0000:0F:00.0", "(unset)"), slot(3, 4, 1, "0000:0F:00.0", "(unset)")};
    ck_assert_int_eq(gpu_plan_check_node(late, 4, "gpu06", msg, sizeof msg), GPU_NODE_SHARED);
    ck_assert_contains(msg, "ranks 2 and 3 on gpu06 would share GPU 0000:0F:00.0 (rank 2: device 1 of 4");
    /* Rank 0 shares with ranks 3 and 1, 3 gathered first: the pair named is 0 and 1. */
    gpu_slot tie[3] = {slot(0, 4, 0, "0000:07:00.0", "(unset)"), slot(3, 4, 0, "0000:07:00.0", "(unset)"),
                       slot(1, 4, 0, "0000:07:00.0", "(unset)")};
    ck_assert_int_eq(gpu_plan_check_node(tie, 3, "gpu07", msg, sizeof msg), GPU_NODE_SHARED);
    ck_assert_contains(msg, "ranks 0 and 1 on gpu07 would share");
    /* Two ranks, two GPUs visible to both, both on device 0: shared, not oversubscribed. */
    gpu_slot two[2] = {slot(0, 2, 0, "0000:07:00.0", "0,1"), slot(1, 2, 0, "0000:07:00.0", "0,1")};
    ck_assert_int_eq(gpu_plan_check_node(two, 2, "gpu08", msg, sizeof msg), GPU_NODE_SHARED);
    /* Three ranks on those two: oversubscribed. */
    gpu_slot three[3] = {slot(0, 2, 0, "0000:07:00.0", "0,1"), slot(1, 2, 1, "0000:0F:00.0", "0,1"),
                         slot(2, 2, 0, "0000:07:00.0", "0,1")};
    ck_assert_int_eq(gpu_plan_check_node(three, 3, "gpu08", msg, sizeof msg), GPU_NODE_OVERSUBSCRIBED);
    ck_assert_contains(msg,
                       "3 ranks on gpu08 but only 2 GPUs visible to them (CUDA_VISIBLE_DEVICES=0,1): ranks 0 and 2 ");
    /* Two visible each, but "0,1" and "1,0": a hand-made split, not one view. */
    three[2] = slot(2, 2, 1, "0000:07:00.0", "1,0");
    ck_assert_int_eq(gpu_plan_check_node(three, 3, "gpu09", msg, sizeof msg), GPU_NODE_SHARED);
    ck_assert_contains(msg, "rank 2: device 1 of 2 visible, CUDA_VISIBLE_DEVICES=1,0)");
}
END_TEST

/* Lengths at their limits: a value of len - 1 characters shown whole, len cut to len - 4 and "..."; a host of
 * hostlen - 1 characters taken, hostlen refused (it would leave no room for the terminator); NCCL's version
 * code 20900, the first of its 5-digit scheme, is 2.9.0. */
START_TEST(test_length_edges)
{
    char buf[16];
    gpu_plan_visible_devices_show("0123456789abcde", buf, sizeof buf);
    ck_assert_str_eq(buf, "0123456789abcde");
    gpu_plan_visible_devices_show("0123456789abcdef", buf, sizeof buf);
    ck_assert_str_eq(buf, "0123456789ab...");
    char host[64];
    int port = 0;
    const char *err = NULL;
    ck_assert_int_eq(gpu_plan_parse_hostport("node012:7", host, 8, &port, &err), 0);
    ck_assert_str_eq(host, "node012");
    ck_assert_int_eq(port, 7);
    err = NULL;
    ck_assert_int_eq(gpu_plan_parse_hostport("node0123:7", host, 8, &port, &err), -1);
    ck_assert_str_eq(err, "host name too long");
    err = NULL;
    ck_assert_int_eq(gpu_plan_parse_hostport("[fe80::12]:7", host, 8, &port, &err), -1);
    ck_assert_str_eq(err, "host name too long");
    ck_assert_int_eq(gpu_plan_parse_hostport("[fe80::1]:7", host, 8, &port, &err), 0);
    ck_assert_str_eq(host, "fe80::1");
    gpu_plan_nccl_version_string(20900, buf, sizeof buf);
    ck_assert_str_eq(buf, "2.9.0");
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
    static const char *const bad[] = {
        "",           "node01",    ":29500",        "node01:",        "node01:0", "node01:65536",
        "node01:12a", "node01:-5", "fe80::1:29500", "[fe80::1]29500", "[]:29500", "node01:99999999999999999999"};
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

START_TEST(test_figures)
{
    ck_assert_double_eq_tol(gpu_plan_algbw(1e9, 0.5), 2e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 2), 1e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 8), 1.75e9, 1);
    ck_assert_double_eq_tol(gpu_plan_busbw_allreduce(1e9, 1.0, 1), 0, 1e-9);
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
    tcase_add_test(tc, test_node_edges);
    tcase_add_test(tc, test_length_edges);
    tcase_add_test(tc, test_hostport);
    tcase_add_test(tc, test_comm_id_precedence);
    tcase_add_loop_test(tc, test_probe_port, 0, 2);
    tcase_add_test(tc, test_probe_not_local);
    tcase_add_test(tc, test_figures);
    suite_add_tcase(s, tc);
    return check_run(s);
}
