/* unit_fmath: hakmem's ln and e^x - 1 (src/fmath.c, which spare the library
 * a dependency on libm) agree with libm's to a few ulp: over the heap
 * profiler's own arguments (uniform draws in (0, 1] for ln; minus a block's
 * size over the sampling interval for e^x - 1), over a wide range of
 * magnitudes, and at the points where the argument reduction switches. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "fmath.h"
#include "support/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* |got - want| within tol relative to want (absolute below DBL_MIN). */
static int close_to(double got, double want, double tol)
{
    double err = fabs(got - want), scale = fabs(want) > DBL_MIN ? fabs(want) : DBL_MIN;
    return err <= tol * scale;
}

static void check_log(double x)
{
    double got = hak_log(x), want = log(x);
    CHECK(close_to(got, want, 4 * DBL_EPSILON), "hak_log(%a) = %.17g, libm %.17g", x, got, want);
}

static void check_expm1(double x)
{
    double got = hak_expm1(x), want = expm1(x);
    CHECK(close_to(got, want, 4 * DBL_EPSILON), "hak_expm1(%a) = %.17g, libm %.17g", x, got, want);
}

int main(void)
{
    ts_check_begin("ln over the profiler's draws and every magnitude");
    for (int i = 0; i < 1000000; i++) check_log((double)((next() >> 11) + 1) * 0x1.0p-53);
    for (int i = 0; i < 200000; i++) {
        double m = 1.0 + (double)(next() >> 11) * 0x1.0p-53;   /* [1, 2) */
        int e = (int)(next() % 2040) - 1020;
        check_log(ldexp(m, e));
    }
    const double logs[] = {1.0, 2.0, 0.5, M_SQRT2, nextafter(M_SQRT2, 0), M_SQRT1_2, nextafter(1.0, 0),
                           nextafter(1.0, 2), 0x1.0p-53, DBL_MIN, 4.9e-324, 1e-310, DBL_MAX, 10.0, M_E};
    for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) check_log(logs[i]);

    ts_check_begin("e^x - 1 over the profiler's arguments and every magnitude");
    const double intervals[] = {4096, 524288, 1 << 20, 1 << 30};
    for (size_t k = 0; k < sizeof intervals / sizeof intervals[0]; k++)
        for (uint64_t units = 1; units < (1u << 20); units += 1 + units / 64)
            check_expm1(-(double)(16 * units) / intervals[k]);
    for (int i = 0; i < 200000; i++) check_expm1(-60.0 * (double)(next() >> 11) * 0x1.0p-53);
    for (int e = -1074; e <= 5; e++) check_expm1(-ldexp(1.0, e));
    const double exps[] = {0.0, -0.0, -0.5, nextafter(-0.5, 0), nextafter(-0.5, -1), -M_LN2 / 2, -M_LN2,
                           -1.5 * M_LN2, -40.0, nextafter(-40.0, 0), -40.5, -745.0, -1e300};
    for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++) check_expm1(exps[i]);
    return ts_check_finish("unit_fmath");
}
