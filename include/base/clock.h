/*
 * The monotonic clock (CLOCK_MONOTONIC): durations, deadlines, rate limits.
 */
#ifndef LSTREAM_BASE_CLOCK_H
#define LSTREAM_BASE_CLOCK_H

#include <stdint.h>

#include "base/api.h"

/* Seconds since an arbitrary fixed point. */
BASE_API double base_now_s(void);

/* Milliseconds since the same point. */
BASE_API int64_t base_now_ms(void);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME), the clock of Kafka's
 * timestamps: for comparing event times with now, never for durations. */
BASE_API int64_t base_wall_ms(void);

#endif /* LSTREAM_BASE_CLOCK_H */
