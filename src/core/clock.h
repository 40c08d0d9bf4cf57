/* Clocks: monotonic milliseconds for timeouts, wall-clock nanoseconds for
 * object timestamps. */
#ifndef OL_CORE_CLOCK_H
#define OL_CORE_CLOCK_H

#include <stdint.h>

uint64_t ol_mono_ms(void);
uint64_t ol_mono_ns(void);
int64_t ol_wall_ns(void);

#endif
