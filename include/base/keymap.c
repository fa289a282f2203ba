/*
 * The key->index map (include/base/keymap.h).
 */
#include "base/keymap.h"

#include <stdlib.h>
#include <string.h>

uint64_t base_key_hash(const void *key, size_t n) {
  const unsigned char *p = key;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  if (n > 0) {
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int64_t base_keymap_find(const base_keymap_t *m, uint64_t hash, const void *key, size_t len) {
  if (m->n == 0) return -1;
  uint32_t const tag = (uint32_t)(hash >> 32);
  for (size_t i = hash & m->mask;; i = (i + 1) & m->mask) {
    base_keymap_slot_t const slot = m->slots[i];
    if (slot.idx == 0) return -1;
    if (slot.tag != tag) continue;
    const base_keymap_entry_t *const e = &m->entries[slot.idx - 1];
    if (e->len == len && !memcmp(e->key, key, len)) return (int64_t)slot.idx - 1;
  }
}

static void place(base_keymap_slot_t *slots, size_t mask, uint64_t hash, uint32_t idx) {
  size_t i = hash & mask;
  while (slots[i].idx != 0)
    i = (i + 1) & mask;
  slots[i].tag = (uint32_t)(hash >> 32);
  slots[i].idx = idx;
}

/* Doubles the entries and the slots when the next add needs it. */
static ls_err_t reserve(base_keymap_t *m, const char *what) {
  LS_RETURN_IF(m->n >= UINT32_MAX - 1, LS_ERR_NOMEM, "%s: %zu keys, the most one map holds", what,
               m->n);
  if (m->n == m->cap) {
    size_t const cap = m->cap ? m->cap * 2 : 32;
    base_keymap_entry_t *const grown = realloc(m->entries, cap * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "%s: no memory for %zu keys", what, cap);
    m->entries = grown;
    m->cap = cap;
  }
  if (m->slots != NULL && (m->n + 1) * 2 <= m->mask + 1) return LS_OK;
  size_t const size = m->slots != NULL ? (m->mask + 1) * 2 : 64;
  base_keymap_slot_t *const slots = calloc(size, sizeof *slots);
  LS_RETURN_IF(slots == NULL, LS_ERR_NOMEM, "%s: no memory for a table of %zu slots", what, size);
  for (size_t i = 0; i < m->n; i++)
    place(slots, size - 1, m->entries[i].hash, (uint32_t)(i + 1));
  free(m->slots);
  m->slots = slots;
  m->mask = size - 1;
  return LS_OK;
}

ls_err_t base_keymap_add(base_keymap_t *m, uint64_t hash, const void *key, size_t len,
                         const char *what) {
  LS_FORWARD_IF_ERROR(reserve(m, what));
  m->entries[m->n] = (base_keymap_entry_t){key, len, hash};
  m->n++;
  place(m->slots, m->mask, hash, (uint32_t)m->n);
  return LS_OK;
}

/* The slot holding index idx (0-based) of an entry with this hash. */
static size_t slot_of(const base_keymap_t *m, uint64_t hash, size_t idx) {
  size_t i = hash & m->mask;
  while (m->slots[i].idx != idx + 1)
    i = (i + 1) & m->mask;
  return i;
}

int64_t base_keymap_remove(base_keymap_t *m, uint64_t hash, const void *key, size_t len) {
  int64_t const found = base_keymap_find(m, hash, key, len);
  if (found < 0) return -1;
  size_t const idx = (size_t)found, last = m->n - 1;
  /* Backward-shift deletion: each later slot of the run moves into the hole
   * unless its home lies cyclically in (hole, it]. */
  size_t hole = slot_of(m, hash, idx);
  for (size_t j = (hole + 1) & m->mask; m->slots[j].idx != 0; j = (j + 1) & m->mask) {
    size_t const home = m->entries[m->slots[j].idx - 1].hash & m->mask;
    int const stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    m->slots[hole] = m->slots[j];
    hole = j;
  }
  m->slots[hole] = (base_keymap_slot_t){0, 0};
  if (idx != last) { /* the last entry takes the freed index */
    m->slots[slot_of(m, m->entries[last].hash, last)].idx = (uint32_t)idx + 1;
    m->entries[idx] = m->entries[last];
  }
  m->n--;
  return found;
}

void base_keymap_free(base_keymap_t *m) {
  free(m->slots);
  free(m->entries);
  *m = (base_keymap_t){0};
}
