/*
 * The consumer's tap (ingest/consumer_internal.h; include/lstream/ingest.h,
 * ls_ingest_records): every record the windower accepts, copied as it is
 * accepted into a buffer the trainer swaps out, so that a live trainer can
 * forecast after each record without waiting for its window. Records count
 * towards the memory bound until taken.
 */
#include <stdlib.h>
#include <string.h>

#include "consumer_internal.h"

/* Room for one more record in b (records of F features). */
static int tap_reserve(tap_buf_t *b, int F) {
  if (b->n < b->cap) return 0;
  int64_t const cap = b->cap ? 2 * b->cap : 1024;
  ls_tap_record_t *const rec = realloc(b->rec, (size_t)cap * sizeof *rec);
  if (rec != NULL) b->rec = rec;
  float *const x = realloc(b->x, (size_t)cap * (size_t)F * sizeof *x);
  if (x != NULL) b->x = x;
  char *const keys = realloc(b->keys, (size_t)cap * (LS_KEY_MAX + 1));
  if (keys != NULL) b->keys = keys;
  if (rec == NULL || x == NULL || keys == NULL) return -1;
  b->cap = cap;
  return 0;
}

int consumer_tap_push(ls_ingest_t *ing, const ls_windower_record_t *r, int32_t partition,
                      int64_t offset, int64_t time) {
  int const F = ing->s.features;
  pthread_mutex_lock(&ing->lock);
  tap_buf_t *const b = &ing->tap_fill;
  int const ok = tap_reserve(b, F) == 0;
  if (ok) {
    b->rec[b->n] = (ls_tap_record_t){
        r->series, r->key, r->key_len, partition, offset, time < 0 ? -1 : time, NULL};
    memcpy(b->x + (size_t)b->n * (size_t)F, r->x, (size_t)F * sizeof *b->x);
    char *const key = b->keys + (size_t)b->n * (LS_KEY_MAX + 1);
    memcpy(key, r->key, r->key_len);
    key[r->key_len] = '\0';
    b->n++;
    atomic_store(&ing->tap_n, b->n);
    pthread_cond_broadcast(&ing->ready);
  }
  pthread_mutex_unlock(&ing->lock);
  if (!ok)
    consumer_fail(ing, LS_ERR_NOMEM, "out of memory for %lld records in the tap",
                  (long long)(2 * b->cap));
  return ok ? 0 : -1;
}

ls_err_t ls_ingest_records(ls_ingest_t *ing, const ls_tap_record_t **recs, int64_t *n) {
  LS_RETURN_IF(ing == NULL || recs == NULL || n == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_records: ing, recs and n must not be NULL");
  LS_RETURN_IF(!ing->s.tap, LS_ERR_STATE,
               "ls_ingest_records: the tap is off (set the ingest key \"tap\" to true)");
  pthread_mutex_lock(&ing->lock);
  tap_buf_t const out = ing->tap_fill;
  ing->tap_fill = ing->tap_out;
  ing->tap_fill.n = 0;
  ing->tap_out = out;
  atomic_store(&ing->tap_n, 0);
  pthread_cond_broadcast(&ing->room); /* a consumer waiting for memory re-checks */
  pthread_mutex_unlock(&ing->lock);
  int const F = ing->s.features;
  for (int64_t i = 0; i < out.n; i++) {
    ing->tap_out.rec[i].x = out.x + (size_t)i * (size_t)F;
    ing->tap_out.rec[i].key = out.keys + (size_t)i * (LS_KEY_MAX + 1);
  }
  *recs = out.rec;
  *n = out.n;
  return LS_OK;
}

void consumer_tap_free(ls_ingest_t *ing) {
  free(ing->tap_fill.rec), free(ing->tap_fill.x), free(ing->tap_fill.keys);
  free(ing->tap_out.rec), free(ing->tap_out.x), free(ing->tap_out.keys);
  memset(&ing->tap_fill, 0, sizeof ing->tap_fill);
  memset(&ing->tap_out, 0, sizeof ing->tap_out);
}
