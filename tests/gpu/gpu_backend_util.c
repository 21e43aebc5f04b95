/* The gpu_backend program's helpers (gpu_backend.h): memory on both backends, random host data, the
 * comparisons. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "gpu_backend.h"
#include "base/rng.h"

const nn_backend *bk[2];
int failures;

/* ---- memory on both backends ----------------------------------------------------------------- */

twin twin_new(const void *host, size_t bytes)
{
    twin t = {{NULL, NULL}, bytes};
    for (int s = 0; s < 2; s++) {
        t.p[s] = bk[s]->alloc(bytes);
        if (host)
            bk[s]->upload(t.p[s], host, bytes);
        else
            bk[s]->zero(t.p[s], bytes);
    }
    return t;
}

void twin_free(twin *t)
{
    for (int s = 0; s < 2; s++)
        bk[s]->free(t->p[s]);
    t->p[0] = t->p[1] = NULL;
}

void *fetch(int s, const void *src, size_t bytes)
{
    void *h = xmalloc(bytes);
    bk[s]->download(h, src, bytes);
    return h;
}

/* ---- random host data -------------------------------------------------------------------------- */

static uint64_t next_key = 0x5eed;

float *rnd(size_t n, float lo, float hi)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform(key, i);
    return p;
}

/* Integers -1 .. levels - 2 as floats: many exact ties (max-pool, argmax). */
float *rnd_levels(size_t n, int levels)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rng_below(key, i, (uint32_t)levels) - 1.0f;
    return p;
}

uint8_t *rnd_bytes(size_t n, unsigned below)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    uint8_t *p = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_below(key, i, below);
    return p;
}

uint64_t *rnd_u64(size_t n, uint64_t below)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    uint64_t *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = below ? rng_u64(key, i) % below : rng_u64(key, i);
    return p;
}

twin twin_rnd(size_t n, float lo, float hi)
{
    float *h = rnd(n, lo, hi);
    twin t = twin_new(h, n * sizeof *h);
    free(h);
    return t;
}

/* ---- comparisons ------------------------------------------------------------------------------- */

/* ref (CPU) against got (GPU). tol 0: every element bit for bit. Otherwise the largest difference
 * against the largest reference value, max |got - ref| <= tol max(max |ref|, least) + slack, or with l2
 * the root-mean-square difference against the root-mean-square reference value (what reduced-precision
 * GEMMs are judged by: they move every element a little, and a few a lot where a near-tie resolved
 * the other way). A NaN in got but not in ref fails. One line either way. */
void compare_metric(const char *what, const float *ref, const float *got, size_t n, double tol, double least,
                    double slack, int l2)
{
    double maxref = 0.0, maxdiff = 0.0, ssd = 0.0, ssr = 0.0;
    size_t differ = 0, worst = 0;
    int nan = 0, exact = tol == 0.0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&ref[i], &got[i], sizeof *ref) != 0)
            differ++;
        if (!isnan(got[i]) != !isnan(ref[i]))
            nan = 1;
        double d = fabs((double)got[i] - (double)ref[i]);
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
        if (fabs((double)ref[i]) > maxref)
            maxref = fabs((double)ref[i]);
        ssd += d * d;
        ssr += (double)ref[i] * (double)ref[i];
    }
    double scale = l2 ? sqrt(ssr / (double)(n ? n : 1)) : maxref, diff = l2 ? sqrt(ssd / (double)(n ? n : 1)) : maxdiff;
    const char *unit = l2 ? "rms" : "max";
    int floored = scale < least;
    scale = floored ? least : scale;
    double rel = scale > 0 ? diff / scale : diff > 0 ? INFINITY : 0.0;
    int ok = !nan && (exact ? differ == 0 : diff <= tol * scale + slack);
    tol += scale > 0 ? slack / scale : 0.0; /* as printed: the bound relative to the scale */
    if (exact)
        printf("%-4s %-46s exact: %zu of %zu differ, max |diff| %.3g\n", ok ? "ok" : "FAIL", what, differ, n, maxdiff);
    else
        printf("%-4s %-46s %s |diff| %.3g = %.3g of %s %.3g (tolerance %.2g)\n", ok ? "ok" : "FAIL", what, unit, diff,
               rel,
               floored ? "floor"
               : l2    ? "rms |ref|"
                       : "max |ref|",
               scale, tol);
    if (!ok) {
        if (nan)
            printf("     a NaN on one device only\n");
        if (n)
            printf("     largest difference at element %zu of %zu: cpu %.9g, cuda %.9g\n", worst, n, (double)ref[worst],
                   (double)got[worst]);
        failures++;
    }
}

void compare(const char *what, const float *ref, const float *got, size_t n, double tol)
{
    compare_metric(what, ref, got, n, tol, 0.0, 0.0, 0);
}

/* The twin's n floats, downloaded from both backends. */
void check(const char *what, const twin *t, size_t n, double tol)
{
    float *a = fetch(0, t->p[0], n * sizeof *a), *b = fetch(1, t->p[1], n * sizeof *b);
    compare(what, a, b, n, tol);
    free(a);
    free(b);
}

/* Raw bytes (labels, argmax indices, ...): bit for bit. */
void check_bytes(const char *what, const twin *t)
{
    unsigned char *a = fetch(0, t->p[0], t->bytes), *b = fetch(1, t->p[1], t->bytes);
    size_t differ = 0;
    for (size_t i = 0; i < t->bytes; i++)
        differ += a[i] != b[i];
    printf("%-4s %-46s exact: %zu of %zu bytes differ\n", differ ? "FAIL" : "ok", what, differ, t->bytes);
    failures += differ != 0;
    free(a);
    free(b);
}

void check_scalar(const char *what, double ref, double got, double tol)
{
    double d = fabs(got - ref), rel = ref != 0 ? d / fabs(ref) : d;
    int ok = rel <= tol;
    printf("%-4s %-46s cpu %.12g, cuda %.12g: relative difference %.3g (tolerance %.2g)\n", ok ? "ok" : "FAIL", what,
           ref, got, rel, tol);
    failures += !ok;
}
