/*
 * The option table (train/conf.c): defaults, --help and the --config keys
 * all come from it; a resume reconciles the configuration with a snapshot's
 * settings option by option (train_conf_adopt): every fixed option in turn,
 * given another value, is refused with a message naming it and both values;
 * left out, it takes the snapshot's; a reported one is reported; a setting
 * of a later version is noted; an option added after the snapshot must be
 * at its default.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

static ls_train_conf_t *conf_new(void) {
  ls_train_conf_t *c = NULL;
  cr_assert_eq(ls_train_conf_new(&c), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "topic", "ticks"), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "features", "3"), LS_OK);
  return c;
}

static void get(const ls_train_conf_t *c, const char *key, char *buf, size_t size) {
  cr_assert_eq(ls_train_conf_get(c, key, buf, size), LS_OK, "%s: %s", key, ls_last_error());
}

/* A value of key that the key accepts and that reads differently from
 * c's current one, into out; 0 if none of the candidates is. */
static int other_value(const ls_train_conf_t *c, const char *key, char *out, size_t size) {
  static const char *const candidates[] = {
      "2",    "3", "0.5", "0.25",  "0.0001", "adamw", "level", "true", "false", "csv",
      "none", "0", "1",   "other", "0,2",    "9",     "1000",  "ms",   "all"};
  char now[256], v[256];
  get(c, key, now, sizeof now);
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    ls_train_conf_t *d = conf_new();
    int ok = ls_train_conf_set(d, key, candidates[i]) == LS_OK;
    if (ok) get(d, key, v, sizeof v);
    ls_train_conf_destroy(d);
    if (ok && strcmp(v, now) != 0) {
      snprintf(out, size, "%s", candidates[i]);
      return 1;
    }
  }
  return 0;
}

/* The settings text of c (fixed and reported keys). */
static void settings_of(const ls_train_conf_t *c, char *text, size_t size, size_t *len) {
  cr_assert_eq(train_conf_settings(c, LS_KEY_FIXED | LS_KEY_NOTED, text, size, len), LS_OK, "%s",
               ls_last_error());
}

Test(conf, defaults_are_the_tables) {
  ls_train_conf_t *const c = conf_new();
  int n = 0;
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++, n++) {
    cr_expect(k->help != NULL && k->help[0], "%s has no help", k->key);
    unsigned const kind = k->flags & (LS_KEY_MODEL | LS_KEY_DATA | LS_KEY_INGEST | LS_KEY_RUN);
    cr_expect(kind != 0 && (kind & (kind - 1)) == 0, "%s: one of model, data, ingest, run", k->key);
    cr_expect(!((k->flags & LS_KEY_FIXED) && (k->flags & LS_KEY_NOTED)), "%s: fixed or noted",
              k->key);
    if (k->def == NULL) continue;
    /* A fresh configuration holds the default, which reads as itself. */
    ls_train_conf_t *d = NULL;
    cr_assert_eq(ls_train_conf_new(&d), LS_OK);
    char a[256], b[256];
    get(d, k->key, a, sizeof a);
    cr_assert_eq(ls_train_conf_set(d, k->key, k->def), LS_OK, "%s=%s: %s", k->key, k->def,
                 ls_last_error());
    get(d, k->key, b, sizeof b);
    cr_expect_str_eq(a, b, "%s: the default %s is not what a new configuration holds", k->key,
                     k->def);
    ls_train_conf_destroy(d);
  }
  cr_expect_gt(n, 40);
  cr_expect_eq(ls_train_conf_set(c, "queue-windows", "7"), LS_OK, "dashes");
  cr_expect_eq(ls_train_conf_set(c, "no_such_key", "7"), LS_ERR_UNKNOWN_KEY);
  ls_train_conf_destroy(c);
}

/* --help lists exactly the table's keys (spelled with dashes) under its
 * model and data heading. */
Test(conf, help_lists_the_table) {
  const char *const lstream = getenv("LSTREAM");
  cr_assert_not_null(lstream, "LSTREAM (the program) is not set");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "'%s' train --help", lstream);
  FILE *const f = popen(cmd, "r");
  cr_assert_not_null(f);
  char line[4096], listed[8192] = " ";
  int in = 0, n_listed = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    /* The heading (two lines), the options, then the next heading. */
    if (strstr(line, "Model and data options") != NULL)
      in = 1;
    else if (in && n_listed > 0 && line[0] != ' ' && line[0] != '\n')
      in = 0;
    char name[128];
    if (in && sscanf(line, "  --%127s", name) == 1 &&
        strlen(listed) + strlen(name) + 2 < sizeof listed) {
      strcat(listed, name), strcat(listed, " ");
      n_listed++;
    }
  }
  cr_assert_eq(pclose(f), 0);
  int n_keys = 0;
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++, n_keys++) {
    char dashed[128];
    snprintf(dashed, sizeof dashed, " %s ", k->key);
    for (char *p = dashed; *p; p++)
      *p = *p == '_' ? '-' : *p;
    cr_expect(strstr(listed, dashed) != NULL, "--help does not list %s", k->key);
  }
  cr_expect_eq(n_listed, n_keys, "--help lists %d model and data options, the table has %d",
               n_listed, n_keys);
}

/* Every fixed option in turn: another value given is refused, naming it
 * and both values; left out, the snapshot's value is taken. */
Test(conf, each_fixed_option_refused_or_taken) {
  ls_train_conf_t *const was = conf_new();
  cr_assert_eq(ls_train_conf_set(was, "window", "8"), LS_OK);
  char text[8192];
  size_t len = 0;
  settings_of(was, text, sizeof text, &len);
  int fixed = 0;
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++) {
    if (!(k->flags & LS_KEY_FIXED)) continue;
    fixed++;
    char other[64], old[256], now[256], note[1024] = "";
    cr_assert(other_value(was, k->key, other, sizeof other), "no other value for %s", k->key);
    get(was, k->key, old, sizeof old);
    /* Given: refused. */
    ls_train_conf_t *c = conf_new();
    cr_assert_eq(ls_train_conf_set(c, "window", "8"), LS_OK);
    cr_assert_eq(ls_train_conf_set(c, k->key, other), LS_OK);
    get(c, k->key, now, sizeof now);
    ls_error_clear();
    cr_expect_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_ERR_INVALID_ARG,
                 "%s=%s was not refused", k->key, other);
    char want[512];
    snprintf(want, sizeof want, " with %s=", k->key);
    cr_expect(strstr(ls_last_error(), want) != NULL && strstr(ls_last_error(), "SNAP") != NULL,
              "%s: the message does not name it: %s", k->key, ls_last_error());
    snprintf(want, sizeof want, "this run gives %s=", k->key);
    cr_expect(strstr(ls_last_error(), want) != NULL, "%s: %s", k->key, ls_last_error());
    ls_train_conf_destroy(c);
    /* Left out (a configuration that holds another value, not given): taken. */
    ls_train_conf_t *d = NULL;
    cr_assert_eq(ls_train_conf_new(&d), LS_OK);
    char before[256], after[256];
    get(d, k->key, before, sizeof before);
    cr_expect_eq(train_conf_adopt(d, text, len, "SNAP", note, sizeof note), LS_OK, "%s: %s", k->key,
                 ls_last_error());
    get(d, k->key, after, sizeof after);
    cr_expect_str_eq(after, old, "%s: not taken from the snapshot (was %s)", k->key, before);
    ls_train_conf_destroy(d);
  }
  cr_expect_geq(fixed, 25);
  ls_train_conf_destroy(was);
}

/* A reported option that changed is reported; a setting this version does
 * not know is noted; a fixed option the snapshot predates must be at its
 * default. */
Test(conf, reported_unknown_and_later_options) {
  ls_train_conf_t *const was = conf_new();
  char text[8192], note[1024] = "";
  size_t len = 0;
  settings_of(was, text, sizeof text, &len);
  ls_train_conf_t *c = conf_new();
  cr_assert_eq(ls_train_conf_set(c, "max_series", "100"), LS_OK);
  cr_assert_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_OK);
  cr_expect(strstr(note, "max_series changed from 0 to 100") != NULL, "%s", note);

  char later[8300];
  int const n = snprintf(later, sizeof later, "%.*slater_option=12\n", (int)len, text);
  note[0] = '\0';
  cr_assert_eq(train_conf_adopt(c, later, (size_t)n, "SNAP", note, sizeof note), LS_OK);
  cr_expect(strstr(note, "later_option=12 is unknown to this lstream") != NULL, "%s", note);

  /* The snapshot without its line for lr: it predates the option. */
  char *const at = strstr(text, "\nlr=");
  cr_assert_not_null(at);
  char *const end = strchr(at + 1, '\n');
  memmove(at, end, strlen(end) + 1);
  len = strlen(text);
  cr_expect_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_train_conf_set(c, "lr", "0.1"), LS_OK);
  ls_error_clear();
  cr_expect_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "before the option lr existed") != NULL, "%s", ls_last_error());
  cr_expect_eq(train_conf_adopt(c, "no equals sign\n", 15, "SNAP", note, sizeof note),
               LS_ERR_CORRUPT);
  ls_train_conf_destroy(c);
  ls_train_conf_destroy(was);
}

/* A snapshot that predates the seasons and the linear path (issue 24), or
 * its forecasts of the later horizons (issue 25), was trained without
 * them: it resumes so, whatever their defaults; given otherwise, they are
 * refused. So too the level profile's weight fitted on every row, the
 * later horizons' mixing without a prior and each quantile's loss at
 * weight 1 (2026-11-29). */
/* The options a snapshot from before them takes, and the values it takes. */
static const struct {
  const char *key, *was;
} EARLIER[] = {{"season", "none"},          {"linear", "false"},    {"horizon_linear", "false"},
               {"mix_profile_rows", "all"}, {"horizon_prior", "0"}, {"quantile_weight", "1"}};

/* c holds every EARLIER key at its earlier value. */
static void expect_earlier(const ls_train_conf_t *c) {
  char v[64];
  for (size_t i = 0; i < sizeof EARLIER / sizeof EARLIER[0]; i++) {
    get(c, EARLIER[i].key, v, sizeof v);
    cr_expect_str_eq(v, EARLIER[i].was, "%s=%s, not %s", EARLIER[i].key, v, EARLIER[i].was);
  }
}

Test(conf, earlier_snapshots_resume_as_trained) {
  ls_train_conf_t *const was = conf_new();
  char text[8192], note[1024] = "", key[80];
  size_t len = 0;
  settings_of(was, text, sizeof text, &len);
  for (size_t i = 0; i < sizeof EARLIER / sizeof EARLIER[0]; i++) {
    snprintf(key, sizeof key, "\n%s=", EARLIER[i].key);
    char *const at = strstr(text, key);
    cr_assert_not_null(at, "%s", key);
    char *const end = strchr(at + 1, '\n');
    memmove(at, end, strlen(end) + 1);
  }
  len = strlen(text);
  ls_train_conf_t *c = conf_new();
  cr_expect_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_OK, "%s",
               ls_last_error());
  expect_earlier(c);
  ls_train_conf_destroy(c);
  c = conf_new();
  cr_assert_eq(ls_train_conf_set(c, "season", "auto"), LS_OK);
  ls_error_clear();
  cr_expect_eq(train_conf_adopt(c, text, len, "SNAP", note, sizeof note), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "season=none") != NULL, "%s", ls_last_error());
  ls_train_conf_destroy(c);
  /* Format 4 kept no settings: the same. */
  c = conf_new();
  cr_expect_eq(train_conf_adopt_earlier(c, "SNAP", note, sizeof note), LS_OK);
  expect_earlier(c);
  ls_train_conf_destroy(c);
  ls_train_conf_destroy(was);
}

/* Doubles go to the last bit: a value that prints alike at 9 digits is
 * still another value. */
Test(conf, doubles_to_the_last_bit) {
  ls_train_conf_t *const a = conf_new(), *const b = conf_new();
  cr_assert_eq(ls_train_conf_set(a, "lr", "0.003"), LS_OK);
  cr_assert_eq(ls_train_conf_set(b, "lr", "0.0030000000001"), LS_OK);
  char text[8192], note[256] = "";
  size_t len = 0;
  settings_of(a, text, sizeof text, &len);
  cr_expect_eq(train_conf_adopt(b, text, len, "SNAP", note, sizeof note), LS_ERR_INVALID_ARG);
  ls_train_conf_destroy(a);
  ls_train_conf_destroy(b);
}
