/*
 * A map from series keys to dense indices 0, 1, 2, ... in the order keys
 * were added: the one hash table over series keys (the windower's series and
 * skip rules, the series table's slots). Open addressing with linear
 * probing at a load of at most 1/2; a slot holds the top 32 bits of the
 * key's hash beside the index, so a probe compares key bytes only on a tag
 * match. The map does not own the keys: an added key's bytes must stay
 * where they are, unchanged, while the map holds them.
 */
#ifndef LSTREAM_BASE_KEYMAP_H
#define LSTREAM_BASE_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/api.h"
#include "lstream/error.h"

typedef struct base_keymap_slot_s {
  uint32_t tag; /* hash >> 32 */
  uint32_t idx; /* index + 1; 0 = empty */
} base_keymap_slot_t;

typedef struct base_keymap_entry_s {
  const char *key; /* len bytes, the caller's */
  size_t len;
  uint64_t hash;
} base_keymap_entry_t;

/* Empty: all zero ({0}). */
typedef struct base_keymap_s {
  base_keymap_slot_t *slots; /* [mask + 1] */
  size_t mask;
  base_keymap_entry_t *entries; /* [n], by index */
  size_t n, cap;
} base_keymap_t;

/* The hash of a key (8 bytes at a time, splitmix64's finalizer): fast, well
 * mixed, not meant for adversarial keys (series ids are the producers'). */
BASE_API uint64_t base_key_hash(const void *key, size_t len);

/* The index of key (hash = base_key_hash(key, len)), or -1. */
BASE_API int64_t base_keymap_find(const base_keymap_t *m, uint64_t hash, const void *key,
                                  size_t len);

/* Adds key, not in the map yet, as index m->n. `what` names the map in
 * messages ("windower series"). LS_ERR_NOMEM when memory or the 2^32 - 2
 * indices a map holds run out; the map is then unchanged. */
BASE_API ls_err_t base_keymap_add(base_keymap_t *m, uint64_t hash, const void *key, size_t len,
                                  const char *what);

/* Removes key: its index is freed and the last index (n - 1) moves into it
 * (the caller moves its item n - 1 to the returned index likewise, unless
 * that was the last). Returns the removed key's index, or -1 when the map
 * does not hold key. The slots keep their size. */
BASE_API int64_t base_keymap_remove(base_keymap_t *m, uint64_t hash, const void *key, size_t len);

/* Frees the map's memory (not the keys); it is then empty. */
BASE_API void base_keymap_free(base_keymap_t *m);

#endif /* LSTREAM_BASE_KEYMAP_H */
