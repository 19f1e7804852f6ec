/* ln and e^x - 1 without libm.  The heap profiler (prof.c) draws its
 * sampling intervals with a logarithm and computes each sample's
 * probability with expm1, and nothing else in hakmem uses libm; linking it
 * cost every process that preloads hakmem libm's pages, about 316 KiB of
 * RSS in a small program (the loader runs libm's IFUNC resolvers, which
 * touch its code), for two calls made only while profiling.
 *
 * Both reduce the argument to a small interval and sum a series whose
 * truncation error is below 1e-19 there, so the result is within a few
 * ulp of libm's (tests/unit/unit_fmath.c compares them). */
#include <string.h>

#include "fmath.h"

/* ln 2 split for an exact product with a small integer (Cody and Waite):
 * the high part's trailing bits are zero. */
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define LN2    (LN2_HI + LN2_LO)
#define SQRT2  1.41421356237309504880

static inline uint64_t bits_of(double x)
{
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static inline double double_of(uint64_t b)
{
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* x = m * 2^e with m in [sqrt(2)/2, sqrt(2)); then
 * ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1),
 * |s| <= 0.1716, so the terms after s^23 add less than 1e-19. */
double hak_log(double x)
{
  uint64_t b = bits_of(x);
  int e = (int)((b >> 52) & 0x7ff);
  if (e == 0) {  /* subnormal: scale into the normal range first */
    b = bits_of(x * 0x1.0p64);
    e = (int)((b >> 52) & 0x7ff) - 64;
  }
  e -= 1023;
  double m = double_of((b & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52));
  if (m >= SQRT2) {
    m *= 0.5;
    e++;
  }
  double s = (m - 1) / (m + 1), s2 = s * s, t = 1.0 / 23;
  for (int k = 21; k >= 1; k -= 2) t = t * s2 + 1.0 / k;
  return (double)e * LN2_HI + ((double)e * LN2_LO + 2 * s * t);
}

/* Near 0 (|x| < 1/2), the Taylor series up to x^16/16! (the rest is below
 * 2e-20), which keeps e^x - 1 exact for tiny x.  Further down,
 * e^x = 2^k e^r with x = k ln 2 + r, |r| <= ln 2 / 2, and e^r by its series
 * up to r^14/14!; below -40, e^x is under 2^-57 and e^x - 1 rounds to -1. */
double hak_expm1(double x)
{
  if (x > -0.5) {
    double t = 1.0;
    for (int k = 16; k >= 2; k--) t = 1.0 + t * x / k;
    return x * t;
  }
  if (x < -40) return -1.0;
  int k = (int)(x / LN2 - 0.5);  /* nearest, x < 0 */
  double r = (x - k * LN2_HI) - k * LN2_LO;
  double t = 1.0;
  for (int i = 14; i >= 1; i--) t = 1.0 + t * r / i;
  return t * double_of((uint64_t)(1023 + k) << 52) - 1.0;
}
