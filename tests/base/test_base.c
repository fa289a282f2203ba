/*
 * The ground floor (include/base/): the FNV-1a digest against its published
 * test vectors, the key->index map (dense indices, growth, keys that share
 * hash tags), KEY=VALUE files (blanks, comments, CRLF, '=' in values, errors
 * naming the line; directories, long lines and NUL bytes refused), CSV fields
 * (RFC 4180 quoting, escapes for bytes that are not text), typed values and
 * key tables, the monotonic clock, CRC-32C against its check value, and
 * shared libraries opened on first use (libm standing in for cuBLAS/NCCL).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/crc32c.h"
#include "base/csv.h"
#include "base/digest.h"
#include "base/keymap.h"
#include "base/kvfile.h"
#include "base/library.h"
#include "base/value.h"

Test(base, fnv1a_test_vectors) {
  /* FNV-1a 64 of "", "a" and "foobar" (the FNV reference's vectors). */
  cr_expect_eq(base_fnv1a(BASE_FNV1A_INIT, "", 0), 0xcbf29ce484222325ull);
  cr_expect_eq(base_fnv1a(BASE_FNV1A_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
  cr_expect_eq(base_fnv1a(BASE_FNV1A_INIT, "foobar", 6), 0x85944171f73967e8ull);
  /* It continues: "foo" then "bar" is "foobar". */
  cr_expect_eq(base_fnv1a(base_fnv1a(BASE_FNV1A_INIT, "foo", 3), "bar", 3), 0x85944171f73967e8ull);
}

Test(base, crc32c) {
  /* The check value of CRC-32C (RFC 3720, and every CRC catalogue). */
  cr_assert_eq(base_crc32c(0, "123456789", 9), 0xe3069283u);
  cr_assert_eq(base_crc32c_portable(0, "123456789", 9), 0xe3069283u);
  uint8_t buf[1000];
  for (int i = 0; i < 1000; i++)
    buf[i] = (uint8_t)(i * 131 + 7);
  for (size_t at = 0; at < 9; at++)
    for (size_t n = 0; n < 300; n += 7) {
      uint32_t const fast = base_crc32c(0, buf + at, n);
      cr_assert_eq(fast, base_crc32c_portable(0, buf + at, n), "at %zu, %zu bytes", at, n);
      /* In two pieces, the same as in one; and combined. */
      uint32_t const a = base_crc32c(0, buf + at, n / 3),
                     b = base_crc32c(0, buf + at + n / 3, n - n / 3);
      cr_assert_eq(base_crc32c(a, buf + at + n / 3, n - n / 3), fast);
      cr_assert_eq(base_crc32c_combine(a, b, n - n / 3), fast, "at %zu, %zu bytes", at, n);
    }
}

/* The fast CRC works on blocks of 4 KiB three at a time: lengths around
 * their multiples, at every alignment, against the table. */
Test(base, crc32c_long) {
  enum { N = 3 * 3 * 4096 + 64 };
  static uint8_t buf[N];
  uint32_t s = 12345;
  for (int i = 0; i < N; i++)
    s = s * 1103515245u + 12345u, buf[i] = (uint8_t)(s >> 16);
  size_t const lens[] = {
      0,         1,    12287, 12288, 12289, 12288 + 7, 2 * 12288 - 1, 2 * 12288, 2 * 12288 + 9,
      3 * 12288, N - 9};
  for (size_t at = 0; at < 9; at++)
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
      size_t const n = lens[k];
      uint32_t const fast = base_crc32c(0xdeadbeefu, buf + at, n);
      cr_assert_eq(fast, base_crc32c_portable(0xdeadbeefu, buf + at, n), "at %zu, %zu bytes", at,
                   n);
      uint32_t const whole = base_crc32c(0, buf + at, n), half = base_crc32c(0, buf + at, n / 2);
      cr_assert_eq(
          base_crc32c_combine(half, base_crc32c(0, buf + at + n / 2, n - n / 2), n - n / 2), whole);
    }
}

Test(base, keymap_dense_indices_and_growth) {
  enum { N = 5000 };
  static char keys[N][16];
  base_keymap_t m = {0};
  cr_expect_eq(base_keymap_find(&m, base_key_hash("x", 1), "x", 1), -1, "an empty map");
  for (int i = 0; i < N; i++) {
    int const len = snprintf(keys[i], sizeof keys[i], "key-%d", i);
    uint64_t const h = base_key_hash(keys[i], (size_t)len);
    cr_assert_eq(base_keymap_find(&m, h, keys[i], (size_t)len), -1);
    cr_assert_eq(base_keymap_add(&m, h, keys[i], (size_t)len, "test"), LS_OK);
    cr_assert_eq(m.n, (size_t)i + 1);
  }
  for (int i = 0; i < N; i++) {
    size_t const len = strlen(keys[i]);
    cr_expect_eq(base_keymap_find(&m, base_key_hash(keys[i], len), keys[i], len), i);
  }
  /* A key that is a prefix of another, and one of another length, are others. */
  cr_expect_eq(base_keymap_find(&m, base_key_hash("key-1", 4), "key-1", 4), -1);
  base_keymap_free(&m);
  cr_expect_eq(m.n, 0);
}

Test(base, keymap_same_hash_keys_are_told_apart) {
  /* Two keys given the same hash (as a collision would): found by bytes. */
  base_keymap_t m = {0};
  uint64_t const h = 0x1234567800000001ull;
  cr_assert_eq(base_keymap_add(&m, h, "first", 5, "test"), LS_OK);
  cr_assert_eq(base_keymap_add(&m, h, "other", 5, "test"), LS_OK);
  cr_expect_eq(base_keymap_find(&m, h, "first", 5), 0);
  cr_expect_eq(base_keymap_find(&m, h, "other", 5), 1);
  cr_expect_eq(base_keymap_find(&m, h, "third", 5), -1);
  base_keymap_free(&m);
}

/* Removal against a plain array doing the same swap-removes: 60000 random
 * adds and removes over 3000 keys (the map grows and shrinks, long probe
 * runs wrap around the table's end, some keys share a hash), then every
 * key's index is the array's. */
Test(base, keymap_remove_keeps_every_other_key) {
  enum { KEYS = 3000, OPS = 60000 };
  static char keys[KEYS][16];
  static int at[KEYS]; /* index in the map, -1 when not in it */
  static int of[KEYS]; /* the key at each index */
  base_keymap_t m = {0};
  uint64_t rng = 7;
  int n = 0;
  for (int k = 0; k < KEYS; k++)
    snprintf(keys[k], sizeof keys[k], "key-%d", k), at[k] = -1;
    /* Keys k and k + 1 (k % 97 == 0) share a hash: collisions on purpose. */
#define HASH(k)                                                                                    \
  base_key_hash(keys[(k) % 97 == 1 ? (k)-1 : (k)], strlen(keys[(k) % 97 == 1 ? (k)-1 : (k)]))
  for (int op = 0; op < OPS; op++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int const k = (int)((rng >> 33) % KEYS);
    size_t const len = strlen(keys[k]);
    if (at[k] < 0) {
      cr_assert_eq(base_keymap_add(&m, HASH(k), keys[k], len, "test"), LS_OK);
      at[k] = n, of[n++] = k;
    } else {
      cr_assert_eq(base_keymap_remove(&m, HASH(k), keys[k], len), at[k], "op %d", op);
      int const last = of[--n];
      if (at[k] != n) at[last] = at[k], of[at[k]] = last;
      at[k] = -1;
      cr_assert_eq(base_keymap_remove(&m, HASH(k), keys[k], len), -1, "removed twice");
    }
    cr_assert_eq(m.n, (size_t)n);
  }
  for (int k = 0; k < KEYS; k++)
    cr_expect_eq(base_keymap_find(&m, HASH(k), keys[k], strlen(keys[k])), at[k], "key %d", k);
#undef HASH
  base_keymap_free(&m);
}

/* Collects a file's pairs as "key=value;" into a buffer; fails on "stop". */
static ls_err_t collect(void *opaque, const char *key, const char *value) {
  if (!strcmp(key, "stop")) return ls_error_set(LS_ERR_INVALID_ARG, "no stop here");
  strcat(opaque, key);
  strcat(opaque, "=");
  strcat(opaque, value);
  strcat(opaque, ";");
  return LS_OK;
}

/* A temporary file of text [n] (NULs included); free the path. */
static char *temp_bytes(const char *text, size_t n) {
  char *const path = strdup("/tmp/lstream-base-XXXXXX");
  int const fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, n), (ssize_t)n);
  close(fd);
  return path;
}

static char *temp_file(const char *text) {
  return temp_bytes(text, strlen(text));
}

Test(base, kvfile) {
  char got[256] = "";
  char *path = temp_file("# comment\n\n  a = 1 \r\n\tb=x=y\n  # indented\nc=\nlast = no newline");
  cr_assert_eq(base_kv_read(path, "test file", collect, got), LS_OK, "%s", ls_last_error());
  cr_expect_str_eq(got, "a=1;b=x=y;c=;last=no newline;");
  unlink(path), free(path);
  const struct {
    const char *text, *needle;
  } bad[] = {{"a=1\nno equals\n", ":2: expected key=value, got 'no equals'"},
             {"a=1\n\n = 3\n", ":3: expected key=value, the key is empty"},
             {"a=1\nstop=1\n", ":2: no stop here"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    got[0] = '\0';
    path = temp_file(bad[i].text);
    cr_expect_neq(base_kv_read(path, "test file", collect, got), LS_OK);
    cr_expect(strstr(ls_last_error(), bad[i].needle) != NULL, "'%s' not in '%s'", bad[i].needle,
              ls_last_error());
    cr_expect(strstr(ls_last_error(), path) != NULL, "the file is named");
    unlink(path), free(path);
  }
  cr_expect_eq(base_kv_read("/nonexistent/x.conf", "test file", collect, got), LS_ERR_IO);
  cr_expect(strstr(ls_last_error(), "cannot open test file /nonexistent/x.conf") != NULL);
}

Test(base, kvfile_refuses_directories_long_lines_and_nul) {
  char got[8192] = "";
  /* A directory is no file of settings (fopen opens one for reading). */
  cr_expect_eq(base_kv_read("/tmp", "test file", collect, got), LS_ERR_IO);
  cr_expect(strstr(ls_last_error(), "test file /tmp: it is a directory") != NULL, "%s",
            ls_last_error());
  cr_expect_str_eq(got, "");
  /* A line of 4095 bytes (its newline aside) is read whole; one more byte is
   * an error naming the line, and nothing of it is applied. */
  char *text = malloc(2 * 4100);
  cr_assert(text != NULL);
  size_t n = (size_t)sprintf(text, "a=1\nk=");
  memset(text + n, 'v', 4095 - 2), n += 4095 - 2;
  text[n++] = '\n';
  char *path = temp_bytes(text, n);
  cr_expect_eq(base_kv_read(path, "test file", collect, got), LS_OK, "%s", ls_last_error());
  cr_expect_eq(strlen(got), strlen("a=1;k=;") + 4093);
  unlink(path), free(path);
  memmove(text + 4 + 3, text + 4 + 2, 4094), n++; /* "k==vvv...": 4096 bytes */
  got[0] = '\0';
  path = temp_bytes(text, n);
  cr_expect_eq(base_kv_read(path, "test file", collect, got), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), ":2: the line is longer than 4095 bytes") != NULL, "%s",
            ls_last_error());
  cr_expect_str_eq(got, "a=1;", "only the lines before it are applied");
  unlink(path), free(path);
  /* The same without a final newline. */
  got[0] = '\0';
  path = temp_bytes(text, n - 1);
  cr_expect_eq(base_kv_read(path, "test file", collect, got), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), ":2: the line is longer than 4095 bytes") != NULL, "%s",
            ls_last_error());
  unlink(path), free(path);
  free(text);
  /* A NUL byte would hide the rest of its line. */
  got[0] = '\0';
  path = temp_bytes("a=1\nb=2\0c=3\nd=4\n", 16);
  cr_expect_eq(base_kv_read(path, "test file", collect, got), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), ":2: the line holds a NUL byte") != NULL, "%s",
            ls_last_error());
  cr_expect_str_eq(got, "a=1;");
  unlink(path), free(path);
}

/* base_csv_field of s [n], as a string. */
static const char *csv_of(const char *s, size_t n) {
  static char out[256];
  memset(out, 0, sizeof out);
  FILE *const f = fmemopen(out, sizeof out, "w");
  cr_assert(f != NULL);
  cr_assert_eq(base_csv_field(f, s, n), 0);
  fclose(f);
  return out;
}

Test(base, csv_fields_rfc4180_and_escapes) {
  const struct {
    const char *in;
    size_t n;
    const char *out;
  } cases[] = {
      {"SYM0001", 7, "SYM0001"},
      {"", 0, ""},
      {"a,b", 3, "\"a,b\""},
      {"say \"hi\"", 8, "\"say \"\"hi\"\"\""},
      {"two\nlines", 9, "\"two\nlines\""},
      {"cr\r", 3, "\"cr\r\""},
      {"tab\there", 8, "tab\there"},
      {"back\\slash", 10, "back\\\\slash"},
      {"nul\0byte", 8, "nul\\x00byte"},
      {"\xc3\xa9t\xc3\xa9", 5, "\xc3\xa9t\xc3\xa9"}, /* UTF-8 stays as it is */
      {"\xe2\x82\xac\xf0\x9f\x93\x88", 7, "\xe2\x82\xac\xf0\x9f\x93\x88"},
      {"\xff\xfe", 2, "\\xff\\xfe"},                   /* never UTF-8 */
      {"\x80x", 2, "\\x80x"},                          /* a stray continuation */
      {"ab\xc3", 3, "ab\\xc3"},                        /* truncated at the end */
      {"\xc3(", 2, "\\xc3("},                          /* a bad continuation */
      {"\xc0\x80", 2, "\\xc0\\x80"},                   /* overlong NUL */
      {"\xed\xa0\x80", 3, "\\xed\\xa0\\x80"},          /* a surrogate */
      {"\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80"}, /* above U+10FFFF */
      {"q\",\xff", 4, "\"q\"\",\\xff\""},              /* quoted and escaped */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_str_eq(csv_of(cases[i].in, cases[i].n), cases[i].out, "case %zu", i);
}

Test(base, values) {
  static const char *const names[] = {"f32", "csv", NULL};
  base_value_t const i = BASE_V_INT(1, 10), u = BASE_V_U64, d = BASE_V_DBL(0, 1),
                     c = BASE_V_CHOICE(names), s = BASE_V_STR(4);
  int iv = 0, cv = 0;
  uint64_t uv = 0;
  double dv = 0;
  char sv[4] = "";
  cr_expect_eq(base_value_parse(&i, "7", &iv), 0);
  cr_expect_eq(iv, 7);
  const char *const bad_ints[] = {"", "0", "11", "7x", "1e1", "99999999999999999999"};
  for (size_t k = 0; k < sizeof bad_ints / sizeof bad_ints[0]; k++)
    cr_expect_eq(base_value_parse(&i, bad_ints[k], &iv), -1, "'%s'", bad_ints[k]);
  cr_expect_eq(iv, 7, "nothing is written on a bad value");
  cr_expect_eq(base_value_parse(&u, "18446744073709551615", &uv), 0);
  cr_expect_eq(uv, UINT64_MAX);
  cr_expect_eq(base_value_parse(&u, "-1", &uv), -1);
  cr_expect_eq(base_value_parse(&d, "0.25", &dv), 0);
  cr_expect_eq(dv, 0.25);
  cr_expect_eq(base_value_parse(&d, "nan", &dv), -1);
  cr_expect_eq(base_value_parse(&d, "1.5", &dv), -1);
  cr_expect_eq(base_value_parse(&c, "csv", &cv), 0);
  cr_expect_eq(cv, 1);
  cr_expect_eq(base_value_parse(&c, "CSV", &cv), -1);
  cr_expect_eq(base_value_parse(&s, "abc", sv), 0);
  cr_expect_str_eq(sv, "abc");
  cr_expect_eq(base_value_parse(&s, "abcd", sv), -1, "3 bytes and the NUL fit in 4");
  char buf[64];
  base_value_expected(&i, buf, sizeof buf);
  cr_expect_str_eq(buf, "an integer in [1, 10]");
  base_value_expected(&c, buf, sizeof buf);
  cr_expect_str_eq(buf, "one of f32, csv");
  cr_expect_eq(base_value_format(&c, &cv, buf, sizeof buf), LS_OK);
  cr_expect_str_eq(buf, "csv");
  cr_expect_eq(base_value_format(&d, &dv, buf, 2), LS_ERR_INVALID_ARG, "a buffer too small");
}

typedef struct settings_s {
  int n;
  char *name;
} settings_t;

Test(base, key_tables) {
  base_key_t const keys[] = {
      {"n", "a number", offsetof(settings_t, n), BASE_V_INT(0, 5), "3", 0},
      {"name", NULL, offsetof(settings_t, name), BASE_V_STR(0), NULL, 0},
  };
  settings_t s = {1, NULL};
  cr_assert_eq(base_keys_defaults(keys, 2, &s), LS_OK);
  cr_expect_eq(s.n, 3, "the default applied");
  cr_expect_null(s.name, "no default: left as it was");
  base_key_t const bad = {"m", NULL, offsetof(settings_t, n), BASE_V_INT(0, 5), "9", 0};
  cr_expect_eq(base_keys_defaults(&bad, 1, &s), LS_ERR_INVALID_ARG, "a default out of its range");
  cr_expect_eq(s.n, 3);
  cr_expect_null(base_keys_find(keys, 2, "nope"));
  const base_key_t *const n = base_keys_find(keys, 2, "n"), *const name = &keys[1];
  cr_assert_eq(base_key_set(n, &s, "4"), LS_OK);
  cr_expect_eq(s.n, 4);
  cr_expect_eq(base_key_set(n, &s, "6"), LS_ERR_INVALID_ARG);
  cr_expect_str_eq(ls_last_error(), "n: '6' is not an integer in [0, 5]");
  cr_assert_eq(base_key_set(name, &s, "x"), LS_OK);
  cr_assert_eq(base_key_set(name, &s, "yz"), LS_OK, "an owned string is replaced");
  cr_expect_str_eq(s.name, "yz");
  char buf[16];
  cr_assert_eq(base_key_get(name, &s, buf, sizeof buf), LS_OK);
  cr_expect_str_eq(buf, "yz");
  cr_expect_eq(base_key_check(n, &s), LS_OK);
  s.n = 9;
  cr_expect_eq(base_key_check(n, &s), LS_ERR_INVALID_ARG);
  cr_expect_str_eq(ls_last_error(), "n: 9 is not an integer in [0, 5]");
  cr_assert_eq(base_key_set(name, &s, ""), LS_OK);
  cr_expect_null(s.name, "\"\" clears an owned string");
  base_key_t const spelled[] = {{"queue_windows", NULL, 0, BASE_V_INT(0, 5), NULL, 0}};
  cr_expect_eq(base_keys_find(spelled, 1, "queue-windows"), &spelled[0], "dashes as underscores");
  cr_expect_eq(base_keys_find(spelled, 1, "queue.windows"), &spelled[0], "dots as underscores");
  cr_expect_null(base_keys_find(spelled, 1, "queue_window"));
}

Test(base, clock_is_monotonic) {
  double const s0 = base_now_s();
  int64_t const m0 = base_now_ms();
  usleep(20000);
  double const s1 = base_now_s();
  int64_t const m1 = base_now_ms();
  /* usleep sleeps at least 20 ms; the two clocks are one. */
  cr_expect_geq(s1 - s0, 0.020);
  cr_expect_geq(m1 - m0, 20);
  cr_expect_leq(m0, (int64_t)(s1 * 1000.0) + 1);
}

/* libm, which every test process has loaded already: opening it again
 * exercises the loader without a library of our own. */
Test(base, library_opened_once_with_its_entry_points) {
  static base_library_t lib =
      BASE_LIBRARY_INIT(BASE_LIBRARY_SO("libm", 6), "libm", "install libc6");
  cr_expect_str_eq(BASE_LIBRARY_SO("libnccl", 2), "libnccl.so.2");
  double (*my_cos)(double) = NULL, (*my_sqrt)(double) = NULL;
  base_symbol_t const syms[] = {{"cos", (void **)&my_cos}, {"sqrt", (void **)&my_sqrt}};
  cr_assert_eq(base_library_open(&lib, syms, 2), LS_OK, "%s", ls_last_error());
  cr_assert_not_null(my_cos);
  cr_expect_eq(my_sqrt(2.25), 1.5);
  cr_expect_eq(my_cos(0.5), cos(0.5));
  /* Later calls give the first one's result without looking again. */
  my_cos = NULL;
  cr_expect_eq(base_library_open(&lib, syms, 2), LS_OK);
  cr_expect_null(my_cos);
  cr_expect_eq(base_library_open(NULL, syms, 2), LS_ERR_INVALID_ARG);
}

Test(base, library_missing_file_or_entry_point) {
  static base_library_t none =
      BASE_LIBRARY_INIT("liblstream-no-such-library.so.1", "Nothing", "install nothing");
  double (*fn)(double) = NULL;
  base_symbol_t const one[] = {{"cos", (void **)&fn}};
  cr_expect_eq(base_library_open(&none, one, 1), LS_ERR_UNSUPPORTED);
  cr_expect(strstr(ls_last_error(), "cannot load Nothing (liblstream-no-such-library.so.1") != NULL,
            "%s", ls_last_error());
  cr_expect(strstr(ls_last_error(), "install nothing, or add its lib folder to LD_LIBRARY_PATH"),
            "%s", ls_last_error());
  /* A library without one of the entry points: none of them is set. */
  static base_library_t old = BASE_LIBRARY_INIT(BASE_LIBRARY_SO("libm", 6), "libm", "a newer libm");
  base_symbol_t const two[] = {{"cos", (void **)&fn}, {"cos_of_the_future", (void **)&fn}};
  cr_expect_eq(base_library_open(&old, two, 2), LS_ERR_UNSUPPORTED);
  cr_expect(strstr(ls_last_error(), "libm.so.6 has no cos_of_the_future") != NULL, "%s",
            ls_last_error());
  cr_expect_null(fn);
  /* The failure is remembered. */
  cr_expect_eq(base_library_open(&old, two, 2), LS_ERR_UNSUPPORTED);
}
