/*
 * The progress bar on stderr (train/progress.h).
 */
#include "progress.h"

#include <inttypes.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli.h"

/* Seconds before anything is shown, and between redraws / plain lines. */
#define PROGRESS_QUIET_S 1.0
#define PROGRESS_TTY_S   0.1
#define PROGRESS_PLAIN_S 5.0
/* Characters of the bar itself. */
#define PROGRESS_WIDTH 24

void cli_progress_init(cli_progress_t *p, const char *label, const char *unit) {
  p->out = stderr;
  p->label = label;
  p->unit = unit;
  p->tty = isatty(fileno(stderr));
  p->shown = 0;
  p->start = p->last = base_now_s();
}

/* A count with an SI suffix: 1234567 -> "1.23M". */
static void si(char *buf, size_t size, double v) {
  if (v >= 1e9)
    snprintf(buf, size, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, size, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    snprintf(buf, size, "%.1fk", v / 1e3);
  else
    snprintf(buf, size, "%.0f", v);
}

/* The text of one report: "label 45% [#########...........] 900000/2000000
 * unit, 1.20M unit/s, ETA 0:01" (the bar only when bar is set). */
static void progress_format(char *buf, size_t size, const char *label, const char *unit,
                            int64_t done, int64_t total, double elapsed_s, int bar) {
  double const rate = elapsed_s > 0 ? (double)done / elapsed_s : 0.0;
  char rate_text[32];
  si(rate_text, sizeof rate_text, rate);
  if (total <= 0) {
    snprintf(buf, size, "%s %" PRId64 " %s, %s %s/s", label, done, unit, rate_text, unit);
    return;
  }
  double const frac = done >= total ? 1.0 : (double)done / (double)total;
  char bar_text[PROGRESS_WIDTH + 3] = "";
  if (bar) {
    int const filled = (int)(frac * PROGRESS_WIDTH);
    bar_text[0] = '[';
    for (int i = 0; i < PROGRESS_WIDTH; i++)
      bar_text[1 + i] = i < filled ? '#' : '.';
    bar_text[PROGRESS_WIDTH + 1] = ']';
    bar_text[PROGRESS_WIDTH + 2] = '\0';
  }
  char eta[32] = "ETA ?";
  if (rate > 0) {
    int64_t const left = (int64_t)((double)(total - (done < total ? done : total)) / rate + 0.5);
    snprintf(eta, sizeof eta, "ETA %" PRId64 ":%02d", left / 60, (int)(left % 60));
  }
  snprintf(buf, size, "%s %3.0f%% %s%s%" PRId64 "/%" PRId64 " %s, %s %s/s, %s", label, 100.0 * frac,
           bar_text, bar ? " " : "", done, total, unit, rate_text, unit, eta);
}

void cli_progress_update(cli_progress_t *p, int64_t done, int64_t total) {
  double const now = base_now_s();
  if (now - p->start < PROGRESS_QUIET_S) return;
  if (now - p->last < (p->tty ? PROGRESS_TTY_S : PROGRESS_PLAIN_S) && p->shown) return;
  char line[256];
  progress_format(line, sizeof line, p->label, p->unit, done, total, now - p->start, p->tty);
  fprintf(p->out, p->tty ? "\r%s\033[K" : "%s\n", line);
  fflush(p->out);
  p->last = now;
  p->shown = 1;
}

void cli_progress_finish(cli_progress_t *p) {
  if (p->shown && p->tty) fputc('\n', p->out);
}
