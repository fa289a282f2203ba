/*
 * Record decoders (include/lstream/ingest.h, "Records"): json and avro
 * records, their paths, keys and times, the reasons of their rejections,
 * the windower reading them, and what values look like.
 */
#include <avro.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lstream/ingest.h"

/* A json decoder of fields, key and time (NULL: the Kafka key / timestamp). */
static ls_decoder_t *json_decoder(const char *fields, const char *key, const char *time,
                                  ls_time_unit_t unit) {
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = LS_FORMAT_JSON;
  spec.features = 0;
  spec.fields = fields, spec.key_field = key, spec.time_field = time, spec.time_unit = unit;
  ls_decoder_t *d = NULL;
  cr_assert_eq(ls_decoder_new(&d, &spec), LS_OK, "%s", ls_last_error());
  return d;
}

/* Decodes value with Kafka key "k" and timestamp 5. */
static ls_reject_t decode(ls_decoder_t *d, const char *value, float *x, ls_decoded_t *out) {
  ls_record_t const rec = {"k", 1, value, strlen(value), 0, 0, 5};
  return ls_decoder_decode(d, &rec, x, out);
}

Test(decode, json_fields_key_and_time) {
  ls_decoder_t *const d = json_decoder("px, q.bid,levels[1].px", "sym", "ts", LS_TIME_AUTO);
  cr_expect_eq(ls_decoder_features(d), 3);
  float x[3];
  ls_decoded_t o;
  const char *const tick =
      " {\"sym\":\"AA\\u00e9\",\"ts\":\"2024-01-02T14:30:00.123Z\",\"px\":187.31,"
      "\"q\":{\"bid\":-1e-3,\"n\":[1,{\"a\":2}]},\"levels\":[{\"px\":1},"
      "{\"px\":2.5}],\"x\":true}\n";
  cr_assert_eq(decode(d, tick, x, &o), LS_REJECT_NONE, "%s", ls_decoder_why(d));
  cr_expect_eq(x[0], 187.31f);
  cr_expect_eq(x[1], -1e-3f);
  cr_expect_eq(x[2], 2.5f);
  cr_expect_eq(o.key_len, 4); /* AA, then U+00E9 in two bytes of UTF-8 */
  cr_expect_eq(memcmp(o.key, "AA\xc3\xa9", 4), 0);
  cr_expect_eq(o.time, 1704205800123); /* date -d 2024-01-02T14:30:00Z +%s */
  ls_decoder_destroy(d);
}

/* The same text gives the same float in JSON and in csv (one parser). */
Test(decode, json_numbers_as_csv) {
  ls_decoder_t *const d = json_decoder("v", NULL, NULL, LS_TIME_AUTO);
  const char *const numbers[] = {"0.1",
                                 "3.4028235e38",
                                 "1.17549435e-38",
                                 "16777217",
                                 "7.038531e-26",
                                 "-0",
                                 "123456789012345678901234567890"};
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
    char value[96];
    snprintf(value, sizeof value, "{\"v\":%s}", numbers[i]);
    float j, c;
    ls_decoded_t o;
    cr_assert_eq(decode(d, value, &j, &o), LS_REJECT_NONE, "%s: %s", numbers[i], ls_decoder_why(d));
    cr_assert_eq(ls_record_decode(LS_FORMAT_CSV, numbers[i], strlen(numbers[i]), 1, &c),
                 LS_REJECT_NONE);
    cr_expect_eq(memcmp(&j, &c, sizeof j), 0, "%s: %a in JSON, %a in csv", numbers[i], j, c);
    cr_expect_eq(o.time, 5, "no time field: the Kafka timestamp");
    cr_expect_eq(o.key_len, 1, "no key field: the Kafka key");
  }
  ls_decoder_destroy(d);
}

/* Each malformed record has its own reason. */
Test(decode, json_reasons) {
  ls_decoder_t *const d = json_decoder("px,qty", "sym", "ts", LS_TIME_AUTO);
  static const struct {
    const char *value;
    ls_reject_t want;
    const char *why; /* in ls_decoder_why */
  } cases[] = {
      {"{\"sym\":\"A\",\"ts\":1,\"qty\":3}", LS_REJECT_FIELD, "'px' is missing"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":null,\"qty\":3}", LS_REJECT_FIELD, "'px' is null"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":1,\"qty\":\"3\"}", LS_REJECT_TYPE, "'qty' is a string"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":true,\"qty\":3}", LS_REJECT_TYPE, "boolean"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":[1],\"qty\":3}", LS_REJECT_TYPE, "an array"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":1.,\"qty\":3}", LS_REJECT_PARSE, "not a JSON number"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":0x1,\"qty\":3}", LS_REJECT_PARSE, "not a JSON number"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":1e39,\"qty\":3}", LS_REJECT_NONFINITE, "range"},
      {"{\"sym\":\"A\",\"ts\":1,\"px\":1.5,", LS_REJECT_PARSE, "truncated"},
      {"{\"sym\":\"A\"} {}", LS_REJECT_PARSE, "not one JSON object"},
      {"[1,2]", LS_REJECT_PARSE, "not one JSON object"},
      {"1618", LS_REJECT_PARSE, "not one JSON object"},
      {"{\"sym\" 1}", LS_REJECT_PARSE, ""},
      {"{\"ts\":1,\"px\":1,\"qty\":3}", LS_REJECT_FIELD, "'sym' is missing"},
      {"{\"sym\":{},\"ts\":1,\"px\":1,\"qty\":3}", LS_REJECT_TYPE, "'sym' is an object"},
      {"{\"sym\":\"A\",\"px\":1,\"qty\":3}", LS_REJECT_FIELD, "'ts' is missing"},
      {"{\"sym\":\"A\",\"ts\":\"2024-01-02T14:30:00\",\"px\":1,\"qty\":3}", LS_REJECT_TIME,
       "with a zone"},
      {"{\"sym\":\"A\",\"ts\":\"2023-02-29T00:00:00Z\",\"px\":1,\"qty\":3}", LS_REJECT_TIME, ""},
      {"{\"sym\":\"A\",\"ts\":-5,\"px\":1,\"qty\":3}", LS_REJECT_TIME, "from 1970"},
      {"{\"sym\":\"A\",\"ts\":false,\"px\":1,\"qty\":3}", LS_REJECT_TYPE, "a time"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float x[2];
    ls_decoded_t o;
    ls_reject_t const r = decode(d, cases[i].value, x, &o);
    cr_expect_eq(r, cases[i].want, "%s: %s, not %s (%s)", cases[i].value, ls_reject2str(r),
                 ls_reject2str(cases[i].want), ls_decoder_why(d));
    cr_expect(strstr(ls_decoder_why(d), cases[i].why) != NULL, "%s: '%s' lacks '%s'",
              cases[i].value, ls_decoder_why(d), cases[i].why);
  }
  ls_decoder_destroy(d);
}

/* Numeric times in every unit; auto by magnitude; ISO 8601 with zones. */
Test(decode, times) {
  static const struct {
    const char *ts;
    ls_time_unit_t unit;
    int64_t ms;
  } cases[] = {
      {"1704205800", LS_TIME_AUTO, 1704205800000},
      {"1704205800.1239", LS_TIME_AUTO, 1704205800123},
      {"1704205800123", LS_TIME_AUTO, 1704205800123},
      {"1704205800123456", LS_TIME_AUTO, 1704205800123},
      {"1704205800123456789", LS_TIME_AUTO, 1704205800123},
      {"1704205800123", LS_TIME_MS, 1704205800123},
      {"1704205800", LS_TIME_S, 1704205800000},
      {"17", LS_TIME_NS, 0},
      {"\"2024-01-02T14:30:00.123456Z\"", LS_TIME_AUTO, 1704205800123},
      {"\"2024-01-02T15:30:00.123+01:00\"", LS_TIME_AUTO, 1704205800123},
      {"\"2024-01-02 09:30:00-0500\"", LS_TIME_AUTO, 1704205800000},
      {"\"2024-02-29T00:00Z\"", LS_TIME_AUTO, 1709164800000},
      {"\"1970-01-01T00:00:00Z\"", LS_TIME_AUTO, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ls_decoder_t *const d = json_decoder("v", NULL, "t", cases[i].unit);
    char value[128];
    snprintf(value, sizeof value, "{\"v\":1,\"t\":%s}", cases[i].ts);
    float x;
    ls_decoded_t o;
    cr_expect_eq(decode(d, value, &x, &o), LS_REJECT_NONE, "%s: %s", value, ls_decoder_why(d));
    cr_expect_eq(o.time, cases[i].ms, "%s (%s): %lld, not %lld", cases[i].ts,
                 ls_time_unit_names[cases[i].unit], (long long)o.time, (long long)cases[i].ms);
    ls_decoder_destroy(d);
  }
}

/* A number as a key is its text; an escape that does not read is a key
 * rejection. */
Test(decode, keys) {
  ls_decoder_t *const d = json_decoder("v", "id", NULL, LS_TIME_AUTO);
  float x;
  ls_decoded_t o;
  cr_assert_eq(decode(d, "{\"v\":1,\"id\":1700}", &x, &o), LS_REJECT_NONE);
  cr_expect_eq(o.key_len, 4);
  cr_expect_eq(memcmp(o.key, "1700", 4), 0);
  cr_expect_eq(decode(d, "{\"v\":1,\"id\":\"\\ud800\"}", &x, &o), LS_REJECT_KEY);
  ls_decoder_destroy(d);
}

/* Specs refused with a message naming what is wrong. */
Test(decode, bad_specs) {
  static const struct {
    ls_format_t fmt;
    const char *fields, *key;
    int features;
    const char *why;
  } cases[] = {
      {LS_FORMAT_JSON, NULL, NULL, 0, "needs --fields"},
      {LS_FORMAT_JSON, "a,,b", NULL, 0, "empty name"},
      {LS_FORMAT_JSON, "a.", NULL, 0, "ends with a dot"},
      {LS_FORMAT_JSON, "a[x]", NULL, 0, "array index"},
      {LS_FORMAT_JSON, "[0]", NULL, 0, "start with a field's name"},
      {LS_FORMAT_JSON, "a,a", NULL, 0, "named twice"},
      {LS_FORMAT_JSON, "a,b", NULL, 3, "features 3"},
      {LS_FORMAT_CSV, "a", NULL, 1, "not of csv"},
      {LS_FORMAT_F32, NULL, "k", 1, "not of f32"},
      {LS_FORMAT_AVRO, "a", NULL, 0, "--avro-schema"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ls_record_spec_t spec;
    ls_record_spec_init(&spec);
    spec.format = cases[i].fmt, spec.fields = cases[i].fields, spec.key_field = cases[i].key;
    spec.features = cases[i].features;
    ls_decoder_t *d = NULL;
    cr_expect_eq(ls_decoder_new(&d, &spec), LS_ERR_INVALID_ARG, "case %zu", i);
    cr_expect(strstr(ls_last_error(), cases[i].why) != NULL, "case %zu: '%s' lacks '%s'", i,
              ls_last_error(), cases[i].why);
    cr_expect_null(d);
  }
}

/* ------------------------------------------------------------------------ */
/* Avro                                                                      */

static const char schema_text[] =
    "{\"type\":\"record\",\"name\":\"Tick\",\"fields\":["
    "{\"name\":\"sym\",\"type\":\"string\"},{\"name\":\"ts\",\"type\":\"long\"},"
    "{\"name\":\"px\",\"type\":\"float\"},{\"name\":\"qty\",\"type\":[\"null\",\"double\"]},"
    "{\"name\":\"q\",\"type\":{\"type\":\"record\",\"name\":\"Q\",\"fields\":["
    "{\"name\":\"bid\",\"type\":\"int\"},{\"name\":\"n\",\"type\":{\"type\":\"array\","
    "\"items\":\"long\"}}]}}]}";

/* A tick encoded by Avro C's writer into buf; its length. qty null when
 * has_qty is 0; framing: a Confluent header of id first when id >= 0. */
static size_t avro_tick(char *buf, size_t size, int has_qty, int64_t id) {
  avro_schema_t schema;
  cr_assert_eq(avro_schema_from_json_length(schema_text, strlen(schema_text), &schema), 0);
  avro_value_iface_t *const iface = avro_generic_class_from_schema(schema);
  avro_value_t v, f, b, q, n, e;
  avro_generic_value_new(iface, &v);
  avro_value_get_by_name(&v, "sym", &f, NULL), avro_value_set_string(&f, "AAPL");
  avro_value_get_by_name(&v, "ts", &f, NULL), avro_value_set_long(&f, 1704205800123);
  avro_value_get_by_name(&v, "px", &f, NULL), avro_value_set_float(&f, 187.31f);
  avro_value_get_by_name(&v, "qty", &f, NULL);
  avro_value_set_branch(&f, has_qty, &b);
  if (has_qty) avro_value_set_double(&b, 100.5);
  avro_value_get_by_name(&v, "q", &q, NULL);
  avro_value_get_by_name(&q, "bid", &f, NULL), avro_value_set_int(&f, -7);
  avro_value_get_by_name(&q, "n", &n, NULL);
  avro_value_append(&n, &e, NULL), avro_value_set_long(&e, 10);
  avro_value_append(&n, &e, NULL), avro_value_set_long(&e, 20);
  size_t at = 0;
  if (id >= 0) {
    unsigned char const head[5] = {0, (unsigned char)(id >> 24), (unsigned char)(id >> 16),
                                   (unsigned char)(id >> 8), (unsigned char)id};
    memcpy(buf, head, 5);
    at = 5;
  }
  avro_writer_t const w = avro_writer_memory(buf + at, (int64_t)(size - at));
  cr_assert_eq(avro_value_write(w, &v), 0, "%s", avro_strerror());
  at += (size_t)avro_writer_tell(w);
  avro_writer_free(w);
  avro_value_decref(&v);
  avro_value_iface_decref(iface);
  avro_schema_decref(schema);
  return at;
}

static ls_decoder_t *avro_decoder(const char *fields, int64_t id) {
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = LS_FORMAT_AVRO;
  spec.features = 0;
  spec.fields = fields, spec.key_field = "sym", spec.time_field = "ts";
  spec.avro_schema = schema_text, spec.avro_schema_id = id;
  ls_decoder_t *d = NULL;
  cr_assert_eq(ls_decoder_new(&d, &spec), LS_OK, "%s", ls_last_error());
  return d;
}

Test(decode, avro_plain_and_confluent) {
  int64_t const ids[] = {LS_AVRO_PLAIN, LS_AVRO_ANY_ID, 42};
  for (size_t k = 0; k < 3; k++) {
    ls_decoder_t *const d = avro_decoder("px,qty,q.bid,q.n[1]", ids[k]);
    char buf[256];
    size_t const len = avro_tick(buf, sizeof buf, 1, ids[k] == LS_AVRO_PLAIN ? -1 : 42);
    ls_record_t rec = {NULL, 0, buf, len, 0, 0, -1};
    float x[4];
    ls_decoded_t o;
    cr_assert_eq(ls_decoder_decode(d, &rec, x, &o), LS_REJECT_NONE, "%s", ls_decoder_why(d));
    cr_expect_eq(x[0], 187.31f);
    cr_expect_eq(x[1], 100.5f);
    cr_expect_eq(x[2], -7.0f);
    cr_expect_eq(x[3], 20.0f);
    cr_expect_eq(o.key_len, 4);
    cr_expect_eq(memcmp(o.key, "AAPL", 4), 0);
    cr_expect_eq(o.time, 1704205800123);
    /* A null branch is a missing value; a byte more, or less, does not read. */
    size_t const null_len = avro_tick(buf, sizeof buf, 0, ids[k] == LS_AVRO_PLAIN ? -1 : 42);
    rec.value_len = null_len;
    cr_expect_eq(ls_decoder_decode(d, &rec, x, &o), LS_REJECT_FIELD, "%s", ls_decoder_why(d));
    rec.value_len = len + 1;
    cr_expect_eq(ls_decoder_decode(d, &rec, x, &o), LS_REJECT_PARSE);
    rec.value_len = len - 1;
    cr_expect_eq(ls_decoder_decode(d, &rec, x, &o), LS_REJECT_PARSE);
    ls_decoder_destroy(d);
  }
  /* Confluent's framing of another id, or none, against an id. */
  ls_decoder_t *const d = avro_decoder("px", 41);
  char buf[256];
  ls_record_t rec = {NULL, 0, buf, avro_tick(buf, sizeof buf, 1, 42), 0, 0, -1};
  float x;
  ls_decoded_t o;
  cr_expect_eq(ls_decoder_decode(d, &rec, &x, &o), LS_REJECT_PARSE);
  cr_expect(strstr(ls_decoder_why(d), "schema id 42, not 41") != NULL, "%s", ls_decoder_why(d));
  rec.value_len = avro_tick(buf, sizeof buf, 1, -1);
  cr_expect_eq(ls_decoder_decode(d, &rec, &x, &o), LS_REJECT_PARSE);
  ls_decoder_destroy(d);
}

Test(decode, avro_bad_specs) {
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = LS_FORMAT_AVRO, spec.features = 0, spec.avro_schema = schema_text;
  const char *const fields[] = {"pz", "q.ask", "px.a", "q.n.x", "px[0]"};
  const char *const why[] = {"no field 'pz' (its fields: sym, ts, px, qty, q)", "no field 'ask'",
                             "not in a record", "not in a record", "no array"};
  for (size_t i = 0; i < 5; i++) {
    spec.fields = fields[i];
    ls_decoder_t *d = NULL;
    cr_expect_eq(ls_decoder_new(&d, &spec), LS_ERR_INVALID_ARG, "%s", fields[i]);
    cr_expect(strstr(ls_last_error(), why[i]) != NULL, "'%s' lacks '%s'", ls_last_error(), why[i]);
  }
  spec.fields = "px", spec.avro_schema = "{\"type\":\"long\"}";
  ls_decoder_t *d = NULL;
  cr_expect_eq(ls_decoder_new(&d, &spec), LS_ERR_INVALID_ARG);
  spec.avro_schema = "{not json";
  cr_expect_eq(ls_decoder_new(&d, &spec), LS_ERR_INVALID_ARG);
}

/* ------------------------------------------------------------------------ */
/* The windower on json records: key and time from the payload              */

Test(decode, windower_takes_key_and_time_from_the_payload) {
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = LS_FORMAT_JSON, spec.features = 0;
  spec.fields = "px", spec.key_field = "sym", spec.time_field = "ts";
  ls_windower_t *w = NULL;
  cr_assert_eq(ls_windower_new_spec(&w, &spec, 2), LS_OK, "%s", ls_last_error());
  const ls_window_t *win = NULL;
  char value[128];
  for (int i = 0; i < 3; i++) {
    snprintf(value, sizeof value, "{\"sym\":\"S\",\"ts\":%d,\"px\":%d}", 1000 + i, i);
    /* No Kafka key, and Kafka timestamps that run backwards. */
    ls_record_t const rec = {NULL, 0, value, strlen(value), 0, i, 99 - i};
    cr_assert_eq(ls_windower_push(w, &rec, &win), LS_REJECT_NONE, "%s", ls_windower_why(w));
  }
  cr_assert_not_null(win);
  cr_expect_eq(win->key_len, 1);
  cr_expect_eq(win->times[0], 1000000); /* seconds by magnitude: ms */
  cr_expect_eq(win->times[2], 1002000);
  cr_expect_eq(win->x[2], 2.0f);
  /* Back in the payload's time: BACKWARDS; a field missing: FIELD, counted. */
  snprintf(value, sizeof value, "{\"sym\":\"S\",\"ts\":999,\"px\":1}");
  ls_record_t const back = {NULL, 0, value, strlen(value), 0, 3, 500};
  cr_expect_eq(ls_windower_push(w, &back, &win), LS_REJECT_BACKWARDS);
  ls_record_t const missing = {NULL, 0, "{\"sym\":\"S\",\"ts\":1003}", 21, 0, 4, 500};
  cr_expect_eq(ls_windower_push(w, &missing, &win), LS_REJECT_FIELD);
  cr_expect(strstr(ls_windower_why(w), "'px' is missing") != NULL, "%s", ls_windower_why(w));
  ls_window_stats_t st;
  ls_windower_stats(w, &st);
  cr_expect_eq(st.rejected[LS_REJECT_FIELD], 1);
  cr_expect_eq(st.rejected[LS_REJECT_BACKWARDS], 1);
  ls_windower_destroy(w);
}

/* ------------------------------------------------------------------------ */
/* What values look like                                                     */

Test(decode, describe) {
  static const struct {
    const char *value;
    size_t len;
    const char *want;
  } cases[] = {
      {"{\"sym\":\"A\",\"px\":1.5,\"qty\":2}", 0,
       "JSON objects with fields sym (string), px (number), qty (number): read them with "
       "--format json --fields px,qty (and --key-field, --time-field: sym)"},
      {"187.31,100\n", 0,
       "CSV text of 2 numbers ('187.31,100?'): read it with --format csv "
       "--features 2"},
      {"1618", 0, "CSV text of 1 number"},
      {"hello", 0, "text of 5 bytes ('hello')"},
      {"\x00\x00\x00\x00\x07\x08SYM", 9, "Confluent's framing of Avro"},
      {"\x00\x00\x80\x3f\x00\x00\x00\x40", 8, "2 float32 values of plausible size"},
      {"", 0, "empty values"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[400];
    ls_value_describe(cases[i].value, cases[i].len ? cases[i].len : strlen(cases[i].value), buf,
                      sizeof buf);
    cr_expect(strstr(buf, cases[i].want) != NULL, "case %zu: '%s' lacks '%s'", i, buf,
              cases[i].want);
  }
}
