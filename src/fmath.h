/* The two logarithm and exponential functions the heap profiler needs,
 * without libm (fmath.c). */
#ifndef HAKMEM_FMATH_H
#define HAKMEM_FMATH_H

#include "base.h"

double hak_log(double x);     /* ln x, for a finite x > 0 */
double hak_expm1(double x);   /* e^x - 1, for x <= 0; exact to a few ulp near 0 */

#endif /* HAKMEM_FMATH_H */
