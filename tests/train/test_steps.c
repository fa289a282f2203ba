/*
 * Step formation (train/steps.h): the replay's look-ahead per partition
 * stays within buffer.records, each window counted as the consumer counts
 * a queued one (T + H records, H the horizon).
 */
#include <criterion/criterion.h>

#include "steps.h"

Test(steps, the_look_ahead_fits_buffer_records) {
  /* 1000 records over 2 partitions: 55 windows of T + 1 = 9 each, 41 of T + 4 = 12. */
  cr_expect_eq(steps_lookahead(1000, 2, 8, 1, 4096), 55);
  cr_expect_eq(steps_lookahead(1000, 2, 8, 4, 4096), 41, "a horizon's records after a window");
  cr_expect_eq(steps_lookahead(1000, 2, 8, 4, 16), 16, "the consumer's queue bound");
  cr_expect_eq(steps_lookahead(10, 2, 8, 4, 4096), 1, "one window at least");
}
