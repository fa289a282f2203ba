/*
 * Kafka client properties on the command line (train/cli.h): `-X key=value`
 * and `--kafka-config FILE` (read by ingest's ls_kafka_config_read),
 * collected in order so that later ones win, to be handed to the library as
 * librdkafka "key=value" settings.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/ingest.h" /* ls_kafka_config_read */

/* Appends a copy of "key=value" kv to props; origin names where it came from
 * in messages. */
static int props_append(cli_kafka_props_t *props, const char *kv, const char *origin) {
  const char *const eq = strchr(kv, '=');
  if (eq == NULL || eq == kv) {
    cli_log(CLI_ERROR, "lstream", "%s: '%s' is not a Kafka property of the form key=value", origin,
            kv);
    return CLI_EXIT_USAGE;
  }
  if (props->n == props->cap) {
    int const cap = props->cap ? 2 * props->cap : 16;
    char **const items = realloc(props->items, (size_t)cap * sizeof *items);
    if (items == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for Kafka properties");
    props->items = items;
    props->cap = cap;
  }
  char *const item = strdup(kv);
  if (item == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for Kafka properties");
  props->items[props->n++] = item;
  return CLI_EXIT_OK;
}

int cli_kafka_props_add(void *props, const char *kv) {
  return props_append(props, kv, "-X");
}

int cli_kafka_props_load(void *props, const char *path) {
  char **settings = NULL;
  int n = 0;
  ls_err_t const err = ls_kafka_config_read(path, &settings, &n);
  if (err != LS_OK) return cli_fail(err, "bad --kafka-config file");
  int rc = CLI_EXIT_OK;
  for (int i = 0; i < n && rc == CLI_EXIT_OK; i++)
    rc = props_append(props, settings[i], path);
  ls_kafka_config_free(settings, n);
  return rc;
}

void cli_kafka_props_free(cli_kafka_props_t *props) {
  for (int i = 0; i < props->n; i++)
    free(props->items[i]);
  free(props->items);
  *props = (cli_kafka_props_t){0};
}
