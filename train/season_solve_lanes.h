/*
 * season_solve.c's kernels for one lane type (included once per type):
 * lanes_t holds one double per lane (LANES of them; LANE(v, l) is lane l
 * of v), FN(name) names this type's functions. With one lane lanes_t is a
 * plain double and the code a solve written for one block, whose loops
 * over p the compiler vectorises.
 */
/* The blocks' sums into the lanes: L [q K + p] = A_qp (p >= q: A's upper
 * triangle, as kept, the lower one transposed, A being symmetric: rows read
 * in order), y [p] = b [p]; lanes past `lanes` take block 0's (their
 * results are not kept). */
static void FN(gather)(const season_t *s, double *const *ms, int lanes, int n, lanes_t *L,
                       lanes_t *y) {
  int const K = s->K;
  const double *A[LANES];
  for (int l = 0; l < LANES; l++)
    A[l] = ms[l < lanes ? l : 0] + HEAD + 2 * (size_t)K;
  for (int q = 0; q < n; q++)
    for (int p = q; p < n; p++) {
      size_t const at = season_tri_at(K, q, p);
      lanes_t v;
      for (int l = 0; l < LANES; l++)
        LANE(v, l) = A[l][at];
      L[(size_t)q * K + p] = v;
    }
  for (int p = 0; p < n; p++) {
    lanes_t v;
    for (int l = 0; l < LANES; l++)
      LANE(v, l) = A[l][season_tri(K) + p];
    y[p] = v;
  }
}

/* L = chol(L + RIDGE I) in place, by columns (L [q K + p] = L_pq, p >= q):
 * a column at a time, four earlier columns a pass, each term in turn, as
 * a block alone would be. ok [l] becomes 0 where lane l is not positive
 * definite (its later columns are then not used). */
SEASON_CLONES static void FN(cholesky)(int K, int n, lanes_t *L, int *ok) {
  for (int q = 0; q < n; q++) {
    lanes_t *const col = L + (size_t)q * K;
    col[q] += RIDGE;
    int k = 0;
    for (; k + 4 <= q; k += 4) {
      const lanes_t *const c0 = L + (size_t)k * K, *const c1 = c0 + K;
      const lanes_t *const c2 = c1 + K, *const c3 = c2 + K;
      lanes_t const l0 = c0[q], l1 = c1[q], l2 = c2[q], l3 = c3[q];
      for (int p = q; p < n; p++)
        col[p] = col[p] - c0[p] * l0 - c1[p] * l1 - c2[p] * l2 - c3[p] * l3;
    }
    for (; k < q; k++) {
      const lanes_t *const ck = L + (size_t)k * K;
      lanes_t const lqk = ck[q];
      for (int p = q; p < n; p++)
        col[p] -= ck[p] * lqk;
    }
    lanes_t lqq;
    for (int l = 0; l < LANES; l++) {
      if (!(LANE(col[q], l) > 0.0)) ok[l] = 0; /* not finite */
      LANE(lqq, l) = ok[l] ? sqrt(LANE(col[q], l)) : 1.0;
    }
    col[q] = lqq;
    for (int p = q + 1; p < n; p++)
      col[p] = col[p] / lqq;
  }
}

/* w = L^-T L^-1 y: L y' = y, then L^T w = y' (y overwritten). */
SEASON_CLONES static void FN(substitute)(int K, int n, const lanes_t *L, lanes_t *y, lanes_t *w) {
  for (int k = 0; k < n; k++) {
    const lanes_t *const ck = L + (size_t)k * K;
    lanes_t const yk = y[k] / ck[k];
    y[k] = yk;
    for (int p = k + 1; p < n; p++)
      y[p] -= ck[p] * yk;
  }
  for (int p = n - 1; p >= 0; p--) {
    const lanes_t *const cp = L + (size_t)p * K;
    lanes_t v = y[p];
    for (int k = p + 1; k < n; k++)
      v -= cp[k] * w[k];
    w[p] = v / cp[p];
  }
}

/* The solve of `lanes` (<= LANES) blocks: season_solve_w's. */
static void FN(solve)(season_t *s, double *const *ms, int lanes, int n) {
  int const K = s->K;
  lanes_t *const L = (lanes_t *)(void *)s->lanes, *const y = L + (size_t)K * K, *const w = y + K;
  int ok[LANES];
  for (int l = 0; l < LANES; l++)
    ok[l] = l < lanes;
  FN(gather)(s, ms, lanes, n, L, y);
  FN(cholesky)(K, n, L, ok);
  FN(substitute)(K, n, L, y, w);
  for (int l = 0; l < lanes; l++)
    for (int p = 0; ok[l] && p < n; p++)
      ms[l][HEAD + p] = LANE(w[p], l);
}
