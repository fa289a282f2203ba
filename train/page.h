/*
 * The live page of --http (train/ internal; README, "Watching a run"): `/`
 * (train/page.html, compiled in), `/chart.js` (Chart.js from Debian's
 * libjs-chart.js, compiled in: the page needs no network) and the JSON
 * behind it:
 *   /api/status                  the run now: steps, losses, ratio, lag,
 *                                records/s, snapshot age, series, health
 *   /api/history                 the run's curves: per point step, time,
 *                                smoothed loss and last value's MSE, their
 *                                ratio, lag and records/s; at most
 *                                PAGE_HISTORY points over the whole run
 *                                (pairs merged as it grows)
 *   /api/series                  the series with recent forecasts
 *   /api/forecasts?series=KEY    one series' last PAGE_RING forecasts
 *                                against their actual values
 * The forecasts are the test-then-train ones of the trained windows (those
 * behind the loss): a ring per series, at most PAGE_SERIES series (a new
 * one takes the place of the one longest in), filled while someone looks
 * (for a minute after a request of /api/series or /api/forecasts: nobody
 * looking costs the step loop a clock read). Nothing survives a restart.
 *
 * Threads: the trainer's thread adds to the history and the rings under a
 * mutex (one lock a step, and one per history point); the HTTP thread
 * copies out under it.
 */
#ifndef LSTREAM_TRAIN_PAGE_H
#define LSTREAM_TRAIN_PAGE_H

#include "http.h"
#include "lstream/train.h"
#include "monitor.h"
#include "train_internal.h"

#define PAGE_HISTORY 512
#define PAGE_RING    256
#define PAGE_SERIES  1024

typedef struct page_s page_t;

/* A page of O targets named by their features feat [O]. */
ls_err_t page_new(int O, const int *feat, page_t **out);
void page_free(page_t *pg); /* accepts NULL */

/* After a step (trainer's thread): s, the monitor's own figures. */
void page_step(page_t *pg, const monitor_sample_t *s, double now);

/* The step's forecasts (trainer's thread): a train_forecasts_fn. */
void page_forecasts(void *page, const train_forecasts_t *fc);

/* Answers req if it is one of the page's paths (1), else 0; live: the
 * sample as /metrics sees it now. */
int page_render(page_t *pg, const http_request_t *req, const monitor_sample_t *live,
                http_reply_t *out);

#endif /* LSTREAM_TRAIN_PAGE_H */
