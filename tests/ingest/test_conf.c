/*
 * Consumer configuration (ingest/conf.c): lstream keys, librdkafka
 * properties passed through, --kafka-config files and their errors (file and
 * line named), start positions, and what ls_ingest_new refuses before it
 * touches the network.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lstream/ingest.h"

static ls_ingest_conf_t *conf_new(void) {
  ls_ingest_conf_t *c = NULL;
  cr_assert_eq(ls_ingest_conf_new(&c), LS_OK);
  return c;
}

/* Writes text to a new temporary file; returns its path (free it). */
static char *temp_file(const char *text) {
  char *const path = strdup("/tmp/lstream-conf-XXXXXX");
  int const fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *const f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void expect_error(ls_err_t got, ls_err_t want, const char *needle) {
  cr_expect_eq(got, want, "got %s: %s", ls_err2str(got), ls_last_error());
  cr_expect(strstr(ls_last_error(), needle) != NULL, "'%s' not in '%s'", needle, ls_last_error());
}

Test(conf, start_parse) {
  ls_start_t s;
  cr_assert_eq(ls_start_parse("beginning", &s), LS_OK);
  cr_expect_eq(s.kind, LS_START_BEGINNING);
  cr_assert_eq(ls_start_parse("end", &s), LS_OK);
  cr_expect_eq(s.kind, LS_START_END);
  cr_assert_eq(ls_start_parse("1234", &s), LS_OK);
  cr_expect_eq(s.kind, LS_START_OFFSET);
  cr_expect_eq(s.value, 1234);
  cr_assert_eq(ls_start_parse("offset:0", &s), LS_OK);
  cr_expect_eq(s.kind, LS_START_OFFSET);
  cr_expect_eq(s.value, 0);
  cr_assert_eq(ls_start_parse("time:1700000000000", &s), LS_OK);
  cr_expect_eq(s.kind, LS_START_TIMESTAMP);
  cr_expect_eq(s.value, 1700000000000LL);
  const char *const bad[] = {"", "-1", "begin", "offset:", "12x", "time:-5", "time:", "END"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(ls_start_parse(bad[i], &s), LS_ERR_INVALID_ARG, "'%s'", bad[i]);
  expect_error(ls_start_parse("begin", &s), LS_ERR_INVALID_ARG, "'begin'");
  cr_expect_eq(ls_start_parse(NULL, &s), LS_ERR_INVALID_ARG);
}

Test(conf, keys) {
  ls_ingest_conf_t *const c = conf_new();
  const char *const good[][2] = {{"topic", "ticks"},
                                 {"format", "csv"},
                                 {"features", "4"},
                                 {"window", "64"},
                                 {"queue.windows", "8"},
                                 {"buffer.records", "100000"},
                                 {"stop", "end"},
                                 {"stop", "never"},
                                 {"flush", "true"},
                                 {"flush", "false"},
                                 {"dead.letter.topic", "dlq"},
                                 {"warn.interval.ms", "0"},
                                 {"start.timeout.ms", "500"},
                                 {"dead.letter.topic", ""}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    cr_expect_eq(ls_ingest_conf_set(c, good[i][0], good[i][1]), LS_OK, "%s=%s: %s", good[i][0],
                 good[i][1], ls_last_error());
  const char *const bad[][2] = {
      {"format", "xml"},   {"features", "0"},      {"features", "4x"},      {"window", "-1"},
      {"window", "65537"}, {"queue.windows", "0"}, {"buffer.records", "1"}, {"stop", "maybe"},
      {"flush", "1"},      {"features", ""}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(ls_ingest_conf_set(c, bad[i][0], bad[i][1]), LS_ERR_INVALID_ARG, "%s=%s",
                 bad[i][0], bad[i][1]);
  expect_error(ls_ingest_conf_set(c, "window", "0"), LS_ERR_INVALID_ARG, "window: '0'");
  expect_error(ls_ingest_conf_set(c, "bootstrap.servers", "x:1"), LS_ERR_UNKNOWN_KEY,
               "ls_ingest_conf_set_kafka");
  cr_expect_eq(ls_ingest_conf_set(c, NULL, "1"), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_ingest_conf_set(NULL, "topic", "t"), LS_ERR_INVALID_ARG);
  ls_ingest_conf_destroy(c);
  ls_ingest_conf_destroy(NULL);
}

/* The typed settings: what ls_ingest_conf_set sets from text, at once. */
Test(conf, settings) {
  ls_ingest_conf_t *const c = conf_new();
  ls_ingest_settings_t s;
  ls_ingest_settings_init(&s);
  cr_expect_eq(s.window, 16, "the trainer's default");
  cr_expect_eq(s.queue_windows, 4096, "the trainer's default");
  cr_expect_eq(s.buffer_records, 16777216, "the trainer's default");
  cr_expect_eq(s.watch_interval_ms, 1000);
  cr_expect_eq(s.topic_recreated, 0, "refuse, the trainer's default");
  cr_expect_null(s.topic);
  char topic[] = "ticks";
  s.topic = topic;
  s.format = LS_FORMAT_CSV;
  s.window = 64;
  s.queue_windows = 8;
  s.stop_at_end = 1;
  cr_assert_eq(ls_ingest_conf_set_settings(c, &s), LS_OK, "%s", ls_last_error());
  topic[0] = 'X'; /* copied: the conf keeps its own */
  ls_ingest_settings_t got;
  cr_assert_eq(ls_ingest_conf_get_settings(c, &got), LS_OK);
  cr_expect_str_eq(got.topic, "ticks");
  cr_expect_eq(got.format, LS_FORMAT_CSV);
  cr_expect_eq(got.window, 64);
  cr_expect_eq(got.queue_windows, 8);
  cr_expect_eq(got.stop_at_end, 1);
  cr_expect_null(got.dead_letter_topic);
  /* The string setter changes the same fields. */
  cr_assert_eq(ls_ingest_conf_set(c, "window", "16"), LS_OK);
  cr_assert_eq(ls_ingest_conf_set(c, "stop", "never"), LS_OK);
  cr_assert_eq(ls_ingest_conf_get_settings(c, &got), LS_OK);
  cr_expect_eq(got.window, 16);
  cr_expect_eq(got.stop_at_end, 0);
  /* A field out of range is named, and nothing changes. */
  ls_ingest_settings_t bad = s;
  bad.window = 0;
  expect_error(ls_ingest_conf_set_settings(c, &bad), LS_ERR_INVALID_ARG, "window: 0");
  bad = s;
  bad.buffer_records = 1;
  expect_error(ls_ingest_conf_set_settings(c, &bad), LS_ERR_INVALID_ARG, "buffer_records: 1");
  bad = s;
  bad.format = (ls_format_t)7;
  expect_error(ls_ingest_conf_set_settings(c, &bad), LS_ERR_INVALID_ARG, "format: 7");
  cr_assert_eq(ls_ingest_conf_get_settings(c, &got), LS_OK);
  cr_expect_eq(got.window, 16);
  cr_expect_eq(got.format, LS_FORMAT_CSV);
  cr_expect_eq(ls_ingest_conf_set_settings(NULL, &s), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_ingest_conf_get_settings(c, NULL), LS_ERR_INVALID_ARG);
  ls_ingest_conf_destroy(c);
}

Test(conf, kafka_properties) {
  ls_ingest_conf_t *const c = conf_new();
  cr_expect_eq(ls_ingest_conf_set_kafka(c, "bootstrap.servers=127.0.0.1:9092"), LS_OK);
  cr_expect_eq(ls_ingest_conf_set_kafka(c, "security.protocol=plaintext"), LS_OK);
  cr_expect_eq(ls_ingest_conf_set_kafka(c, "fetch.wait.max.ms=10"), LS_OK);
  expect_error(ls_ingest_conf_set_kafka(c, "no.such.property=1"), LS_ERR_UNKNOWN_KEY,
               "no.such.property");
  expect_error(ls_ingest_conf_set_kafka(c, "fetch.wait.max.ms=soon"), LS_ERR_INVALID_ARG,
               "fetch.wait.max.ms");
  expect_error(ls_ingest_conf_set_kafka(c, "fetch.wait.max.ms"), LS_ERR_INVALID_ARG, "key=value");
  expect_error(ls_ingest_conf_set_kafka(c, "=1"), LS_ERR_INVALID_ARG, "key=value");
  ls_ingest_conf_destroy(c);
}

Test(conf, kafka_config_file) {
  char *const path = temp_file("# a comment\n"
                               "\n"
                               "bootstrap.servers = 127.0.0.1:9092\n"
                               "  client.id=lstream-test\r\n"
                               "\t# indented comment\n"
                               "sasl.username=a=b\n"
                               "fetch.wait.max.ms=25");
  char **settings = NULL;
  int n = 0;
  cr_assert_eq(ls_kafka_config_read(path, &settings, &n), LS_OK, "%s", ls_last_error());
  cr_assert_eq(n, 4);
  cr_expect_str_eq(settings[0], "bootstrap.servers=127.0.0.1:9092");
  cr_expect_str_eq(settings[1], "client.id=lstream-test");
  cr_expect_str_eq(settings[2], "sasl.username=a=b");
  cr_expect_str_eq(settings[3], "fetch.wait.max.ms=25");
  ls_ingest_conf_t *const c = conf_new();
  for (int i = 0; i < n; i++)
    cr_expect_eq(ls_ingest_conf_set_kafka(c, settings[i]), LS_OK);
  ls_ingest_conf_destroy(c);
  ls_kafka_config_free(settings, n);
  ls_kafka_config_free(NULL, 0);
  unlink(path);
  free(path);
}

Test(conf, kafka_config_file_errors) {
  struct {
    const char *text, *needle;
    ls_err_t err;
  } const cases[] = {
      {"client.id=x\nno equals sign\n", ":2: expected key=value", LS_ERR_INVALID_ARG},
      {"# c\n\n=value\n", ":3: expected key=value", LS_ERR_INVALID_ARG},
      {"client.id=x\n  = v\n", ":2: expected key=value", LS_ERR_INVALID_ARG},
      {"a.b.c=1\n", ":1: ", LS_ERR_UNKNOWN_KEY},
      {"fetch.wait.max.ms=x\n", ":1: ", LS_ERR_INVALID_ARG},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *const path = temp_file(cases[i].text);
    char **settings = (char **)1;
    int n = -1;
    char needle[512];
    snprintf(needle, sizeof needle, "%s%s", path, cases[i].needle);
    expect_error(ls_kafka_config_read(path, &settings, &n), cases[i].err, needle);
    cr_expect_null(settings);
    cr_expect_eq(n, 0);
    unlink(path);
    free(path);
  }
  char **settings;
  int n;
  expect_error(ls_kafka_config_read("/nonexistent/kafka.conf", &settings, &n), LS_ERR_IO,
               "/nonexistent/kafka.conf");
}

Test(conf, partitions) {
  ls_ingest_conf_t *const c = conf_new();
  ls_start_t const beginning = {LS_START_BEGINNING, 0};
  cr_expect_eq(ls_ingest_conf_add_partition(c, 0, beginning), LS_OK);
  for (int32_t p = 1; p < 40; p++) /* the array grows */
    cr_expect_eq(ls_ingest_conf_add_partition(c, p, beginning), LS_OK);
  expect_error(ls_ingest_conf_add_partition(c, 3, beginning), LS_ERR_INVALID_ARG, "twice");
  cr_expect_eq(ls_ingest_conf_add_partition(c, -1, beginning), LS_ERR_INVALID_ARG);
  ls_start_t const negative = {LS_START_OFFSET, -3};
  cr_expect_eq(ls_ingest_conf_add_partition(c, 50, negative), LS_ERR_INVALID_ARG);
  ls_start_t const unknown = {(ls_start_kind_t)9, 0};
  cr_expect_eq(ls_ingest_conf_add_partition(c, 51, unknown), LS_ERR_INVALID_ARG);
  ls_ingest_conf_destroy(c);
}

/* What ls_ingest_new refuses before it connects anywhere. */
Test(conf, new_refuses_incomplete_conf) {
  ls_ingest_conf_t *const c = conf_new();
  ls_ingest_t *ing = (ls_ingest_t *)1;
  expect_error(ls_ingest_new(&ing, c), LS_ERR_INVALID_ARG, "topic");
  cr_expect_null(ing);
  cr_assert_eq(ls_ingest_conf_set(c, "topic", "t"), LS_OK);
  expect_error(ls_ingest_new(&ing, c), LS_ERR_INVALID_ARG, "no partitions");
  ls_start_t const beginning = {LS_START_BEGINNING, 0};
  cr_assert_eq(ls_ingest_conf_add_partition(c, 0, beginning), LS_OK);
  cr_assert_eq(ls_ingest_conf_set(c, "window", "10"), LS_OK);
  cr_assert_eq(ls_ingest_conf_set(c, "buffer.records", "21"), LS_OK);
  expect_error(ls_ingest_new(&ing, c), LS_ERR_INVALID_ARG, "buffer.records=21");
  expect_error(ls_ingest_topic_partitions(NULL, NULL), LS_ERR_INVALID_ARG, "NULL");
  cr_expect_eq(ls_ingest_new(NULL, c), LS_ERR_INVALID_ARG);
  ls_ingest_destroy(NULL);
  ls_ingest_conf_destroy(c);
}
