/*
 * A progress bar on stderr for a bounded job (a replay to the high
 * watermarks, a bulk produce): records done, percent, rate and ETA. On a
 * terminal it redraws one line in place, at most 10 times a second; when
 * stderr is not a terminal (a log, CI) it prints a plain line every 5 s.
 * Nothing is shown during the first second, so short jobs stay quiet.
 * Driver code (train/): the library only reports counts.
 */
#ifndef LSTREAM_TRAIN_PROGRESS_H
#define LSTREAM_TRAIN_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct cli_progress_s {
  FILE *out;
  const char *label; /* e.g. "ingest" */
  const char *unit;  /* e.g. "records" */
  int tty;           /* out is a terminal: redraw in place */
  int shown;         /* something was printed */
  double start, last;
} cli_progress_t;

/* Starts a bar on stderr; label and unit must outlive it. */
void cli_progress_init(cli_progress_t *p, const char *label, const char *unit);

/* Reports done of total (total <= 0: unknown, no percent or ETA); prints
 * only when a redraw is due. */
void cli_progress_update(cli_progress_t *p, int64_t done, int64_t total);

/* Ends the bar (the terminal line is left as is, with a newline). */
void cli_progress_finish(cli_progress_t *p);

#endif /* LSTREAM_TRAIN_PROGRESS_H */
