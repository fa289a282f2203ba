/*
 * Kafka client properties on the command line (train/cli.h): `-X key=value`
 * and `--kafka-config FILE`, collected in order so that later ones win, to
 * be handed to the library as librdkafka "key=value" settings.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends "key=value" (len bytes of kv) to props; origin names where it came
 * from in messages. */
static int props_append(cli_kafka_props_t *props, const char *kv, size_t len, const char *origin) {
  const char *const eq = memchr(kv, '=', len);
  if (eq == NULL || eq == kv) {
    fprintf(stderr, "lstream: %s: '%.*s' is not a Kafka property of the form key=value\n", origin,
            (int)len, kv);
    return CLI_EXIT_USAGE;
  }
  if (props->n == props->cap) {
    int const cap = props->cap ? 2 * props->cap : 16;
    char **const items = realloc(props->items, (size_t)cap * sizeof *items);
    if (items == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for Kafka properties");
    props->items = items;
    props->cap = cap;
  }
  char *const item = strndup(kv, len);
  if (item == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for Kafka properties");
  props->items[props->n++] = item;
  return CLI_EXIT_OK;
}

int cli_kafka_props_add(cli_kafka_props_t *props, const char *kv) {
  return props_append(props, kv, strlen(kv), "-X");
}

int cli_kafka_props_load(cli_kafka_props_t *props, const char *path) {
  FILE *const f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "lstream: cannot open Kafka config file '%s': %s\n", path, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = CLI_EXIT_OK;
  for (long lineno = 1; rc == CLI_EXIT_OK && (n = getline(&line, &cap, f)) >= 0; lineno++) {
    const char *s = line;
    size_t len = (size_t)n;
    while (len > 0 && (*s == ' ' || *s == '\t')) s++, len--;
    while (len > 0 && strchr(" \t\r\n", s[len - 1]) != NULL) len--;
    if (len == 0 || s[0] == '#') continue;
    char origin[4200];
    snprintf(origin, sizeof origin, "%s:%ld", path, lineno);
    rc = props_append(props, s, len, origin);
  }
  free(line);
  fclose(f);
  return rc;
}

void cli_kafka_props_free(cli_kafka_props_t *props) {
  for (int i = 0; i < props->n; i++) free(props->items[i]);
  free(props->items);
  *props = (cli_kafka_props_t){0};
}
