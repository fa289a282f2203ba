/*
 * The lstream program's log lines (train/cli/log.h).
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "monitor.h" /* monitor_text_t, monitor_text_json: JSON strings */

static int log_json; /* --log-format json */
static int log_rank = -1;

static const char *const level_text[] = {"INFO", "WARN", "ERROR"};
static const char *const level_json[] = {"info", "warn", "error"};

int cli_log_format_opt(void *unused, const char *value) {
  (void)unused;
  if (strcmp(value, "text") != 0 && strcmp(value, "json") != 0)
    return cli_usage_error("train", "--log-format '%s': expected text or json", value);
  log_json = !strcmp(value, "json");
  return CLI_EXIT_OK;
}

void cli_log_set_rank(int rank) {
  log_rank = rank;
}

/* Now as 2026-11-27T07:08:46.123Z into buf (32 bytes). */
static void iso_time(char *buf, size_t size) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t const n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, size - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* Writes all of text to stderr in one write where the system allows. */
static void put(const char *text, size_t len) {
  while (len > 0) {
    ssize_t const n = write(STDERR_FILENO, text, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n, len -= (size_t)n;
  }
}

void cli_log(cli_level_t level, const char *logger, const char *fmt, ...) {
  monitor_text_t msg = {0}, line = {0};
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int const n = vsnprintf(NULL, 0, fmt, ap);
  char *const text = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (text != NULL) vsnprintf(text, (size_t)n + 1, fmt, again);
  va_end(again);
  va_end(ap);
  if (text == NULL) return;
  if (n > 0 && text[n - 1] == '\n') text[n - 1] = '\0';
  char when[40];
  iso_time(when, sizeof when);
  if (log_json) {
    monitor_text_add(&line, "{\"time\":\"%s\",\"level\":\"%s\",\"logger\":", when,
                     level_json[level]);
    monitor_text_json(&line, logger);
    if (log_rank >= 0) monitor_text_add(&line, ",\"rank\":%d", log_rank);
    monitor_text_add(&line, ",\"msg\":");
    monitor_text_json(&line, text);
    monitor_text_add(&line, "}\n");
  } else {
    if (log_rank >= 0) monitor_text_add(&msg, "rank %d: ", log_rank);
    monitor_text_add(&line, "%s %s %s: %s%s\n", when, level_text[level], logger,
                     msg.text != NULL ? msg.text : "", text);
  }
  if (!line.nomem && line.text != NULL)
    put(line.text, line.len);
  else /* no memory for the line: the message as it is, still one line */
    put(text, strlen(text)), put("\n", 1);
  free(text), free(msg.text), free(line.text);
}
