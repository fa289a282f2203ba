/*
 * The settings a snapshot keeps of its run's configuration, and a resumed
 * run's reconciled with them (train/train_internal.h): the fixed keys
 * taken from the snapshot, a key that came after it at the value it was
 * trained with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/value.h"
#include "train_internal.h"

/* k's value in c as text, doubles to the last bit (settings, fingerprint). */
static ls_err_t key_text(const base_key_t *k, const ls_train_conf_t *c, char *buf, size_t size) {
  if (k->value.kind != BASE_DBL) return base_key_get(k, c, buf, size);
  double v;
  memcpy(&v, (const char *)c + k->offset, sizeof v);
  int const n = snprintf(buf, size, "%.17g", v);
  LS_RETURN_IF(n < 0 || (size_t)n >= size, LS_ERR_INVALID_ARG, "%s: no room for its value",
               k->name);
  return LS_OK;
}

ls_err_t train_conf_settings(const ls_train_conf_t *c, unsigned mask, char *buf, size_t size,
                             size_t *len) {
  size_t n_keys;
  const base_key_t *const keys = train_conf_table(&n_keys);
  LS_RETURN_IF(c == NULL || buf == NULL || size == 0 || len == NULL, LS_ERR_INVALID_ARG,
               "conf, buffer or length is NULL");
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n_keys; i++) {
    if (!(keys[i].flags & mask)) continue;
    char v[1100];
    LS_FORWARD_IF_ERROR(key_text(&keys[i], c, v, sizeof v));
    int const n = snprintf(buf + at, size - at, "%s=%s\n", keys[i].name, v);
    LS_RETURN_IF(n < 0 || (size_t)n >= size - at, LS_ERR_INVALID_ARG,
                 "no room for the settings (%zu bytes)", size);
    at += (size_t)n;
  }
  *len = at;
  return LS_OK;
}

/* Appends to note (size) as printf does, never past its end. */
static void note_add(char *note, size_t size, const char *fmt, const char *a, const char *b,
                     const char *c) {
  size_t const len = strlen(note);
  if (len + 1 < size) snprintf(note + len, size - len, fmt, a, b, c);
}

/* Options whose default changed training when they came (or whose
 * default changed: replay, 4 until 2026-11-28): a snapshot written before
 * them (or, for replay, before its settings were kept: format 4) was
 * trained as with these values (issue 24). */
static const struct {
  const char *key, *value;
} earlier[] = {{"season", "none"},          {"linear", "false"},      {"auto_seasons", "1"},
               {"season_levels", "false"},  {"linear_blocks", "0"},   {"linear_wait", "2"},
               {"horizon_linear", "false"}, {"mix_profile", "false"}, {"replay", "4"},
               {"mix_profile_rows", "all"}, {"horizon_prior", "0"},   {"quantile_weight", "1"}};

static const char *earlier_value(const char *key) {
  for (size_t i = 0; i < sizeof earlier / sizeof earlier[0]; i++)
    if (!strcmp(earlier[i].key, key)) return earlier[i].value;
  return NULL;
}

/* The snapshot's value of one key against c's; key k's row. */
static ls_err_t adopt_one(ls_train_conf_t *c, const base_key_t *k, const char *was,
                          const char *path, char *note, size_t note_size) {
  size_t n_keys;
  const base_key_t *const keys = train_conf_table(&n_keys);
  char now[1100];
  LS_FORWARD_IF_ERROR(key_text(k, c, now, sizeof now));
  if (!strcmp(now, was)) return LS_OK;
  int const given = c->given[k - keys];
  if (k->flags & LS_KEY_FIXED) {
    LS_RETURN_IF(given, LS_ERR_INVALID_ARG,
                 "snapshot %s was written with %s=%s; this run gives %s=%s, which may not change "
                 "across a resume: leave it out to take the snapshot's, give the same, or "
                 "--resume none",
                 path, k->name, was, k->name, now);
    LS_FORWARD_IF_ERROR(base_key_set(k, c, was));
    note_add(note, note_size, "%s=%s taken from the snapshot (the default is %s); ", k->name, was,
             now);
  } else if (k->flags & LS_KEY_NOTED) {
    note_add(note, note_size,
             "%s changed from %s to %s across the resume (from here the run differs from an "
             "uninterrupted one); ",
             k->name, was, now);
  }
  return LS_OK;
}

ls_err_t train_conf_adopt(ls_train_conf_t *c, const char *text, size_t len, const char *path,
                          char *note, size_t note_size) {
  size_t n_keys;
  const base_key_t *const keys = train_conf_table(&n_keys);
  LS_RETURN_IF(c == NULL || (text == NULL && len > 0) || path == NULL || note == NULL,
               LS_ERR_INVALID_ARG, "conf, settings, path or note is NULL");
  unsigned char seen[TRAIN_KEYS_MAX] = {0};
  for (size_t at = 0; at < len;) {
    const char *const line = text + at;
    const char *const nl = memchr(line, '\n', len - at);
    size_t const n = nl != NULL ? (size_t)(nl - line) : len - at;
    at += n + 1;
    const char *const eq = memchr(line, '=', n);
    LS_RETURN_IF(eq == NULL || eq == line || n >= 1200, LS_ERR_CORRUPT,
                 "snapshot %s: its settings hold a line that is not key=value", path);
    char key[80], was[1200];
    size_t const kl = (size_t)(eq - line);
    LS_RETURN_IF(kl >= sizeof key, LS_ERR_CORRUPT, "snapshot %s: a setting's key is too long",
                 path);
    memcpy(key, line, kl), key[kl] = '\0';
    memcpy(was, eq + 1, n - kl - 1), was[n - kl - 1] = '\0';
    const base_key_t *const k = base_keys_find(keys, n_keys, key);
    if (k == NULL || strcmp(k->name, key) != 0) {
      /* A setting of a later lstream: this one cannot honour it. */
      note_add(note, note_size, "the snapshot's setting %s=%s is unknown to this lstream%s; ", key,
               was, "");
      continue;
    }
    seen[k - keys] = 1;
    LS_FORWARD_IF_ERROR(adopt_one(c, k, was, path, note, note_size));
  }
  /* Keys that came after the snapshot: it was trained as with their value
   * before they existed (earlier_value: the old behaviour), or else their
   * default (an option added with the old behaviour as its default). */
  for (size_t i = 0; i < n_keys; i++) {
    if (seen[i] || !(keys[i].flags & LS_KEY_FIXED) || keys[i].def == NULL) continue;
    const char *const was = earlier_value(keys[i].name);
    if (was != NULL) {
      LS_FORWARD_IF_ERROR(adopt_one(c, &keys[i], was, path, note, note_size));
      continue;
    }
    ls_train_conf_t *const d = calloc(1, sizeof *d);
    LS_RETURN_IF(d == NULL, LS_ERR_NOMEM, "no memory for a configuration");
    char def[1100], now[1100];
    ls_err_t err = base_key_set(&keys[i], d, keys[i].def);
    if (err == LS_OK) err = key_text(&keys[i], d, def, sizeof def);
    if (err == LS_OK) err = key_text(&keys[i], c, now, sizeof now);
    if (keys[i].value.kind == BASE_STR && keys[i].value.size == 0)
      free(*(char **)((char *)d + keys[i].offset));
    free(d);
    LS_FORWARD_IF_ERROR(err);
    LS_RETURN_IF(strcmp(def, now) != 0, LS_ERR_INVALID_ARG,
                 "snapshot %s was written before the option %s existed (as with its default %s); "
                 "this run gives %s=%s: resume with the default, or --resume none",
                 path, keys[i].name, def, keys[i].name, now);
  }
  return LS_OK;
}

const char *train_conf_fixed_names(void) {
  size_t n_keys;
  const base_key_t *const keys = train_conf_table(&n_keys);
  static char names[1024];
  if (names[0] != '\0') return names;
  size_t at = 0;
  for (size_t i = 0; i < n_keys && at + 1 < sizeof names; i++)
    if (keys[i].flags & LS_KEY_FIXED)
      at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "", keys[i].name);
  return names;
}

ls_err_t train_conf_adopt_earlier(ls_train_conf_t *c, const char *path, char *note,
                                  size_t note_size) {
  LS_RETURN_IF(c == NULL || path == NULL || note == NULL, LS_ERR_INVALID_ARG,
               "conf, path or note is NULL");
  size_t n_keys;
  const base_key_t *const keys = train_conf_table(&n_keys);
  for (size_t i = 0; i < sizeof earlier / sizeof earlier[0]; i++) {
    const base_key_t *const k = base_keys_find(keys, n_keys, earlier[i].key);
    LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "an earlier value of an unknown option %s",
                 earlier[i].key);
    LS_FORWARD_IF_ERROR(adopt_one(c, k, earlier[i].value, path, note, note_size));
  }
  return LS_OK;
}
