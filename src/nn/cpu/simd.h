/* Vectorisation of the CPU loops over ops.h functions (nn_cpu.c, nchw16c.c) beyond SIMD (base/threads.h):
 * clones for wider vectors. */
#ifndef MNIST_SIMD_H
#define MNIST_SIMD_H

/* A loop that only wider vectors make much cheaper (the dropout generator's 64-bit multiplies, which
 * SSE2 lacks; nchw16c.c's 16-lane transposes) also gets an AVX-512 clone and an AVX2 one (CPUs without
 * AVX-512: Zen 2 and 3). What the CPU has picks the clone at load time (GCC's ifunc-based target_clones; not
 * ONEDNN_MAX_CPU_ISA). Integer math, selects, element moves and lone additions only
 * (no multiply to fuse into a multiply-add), so every clone computes the same bits. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) && defined(__linux__)
#define WIDE_CLONES       __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
/* Floating-point loops in every clone with the same bits: no multiply and add fused into one rounding
 * (GCC contracts them where the clone's ISA has FMA). */
#define EXACT_WIDE_CLONES WIDE_CLONES __attribute__((optimize("fp-contract=off")))
#else
#define WIDE_CLONES
#define EXACT_WIDE_CLONES
#endif
#endif
