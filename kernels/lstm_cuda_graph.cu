/*
 * CUDA graphs for the CUDA backend (kernels/lstm_cuda.h; the CPU's
 * graph_run calls its queue): the work of one part of a step, recorded
 * once by stream capture and replayed by one graph launch.
 *
 * The engine gives each part of a step (the forward, the backward or its
 * segments, the update) a key naming everything its launches depend on
 * (T, B, buffers, host scalars); the values the launches read from device
 * memory (inputs, parameters, the update's arguments) may change. A key
 * is recorded the second time it is seen, so a shape that comes once (a
 * partial batch of an odd size) runs directly and costs no capture; the
 * context keeps GRAPHS of them and drops the least recently used.
 * LSTREAM_CUDA_GRAPHS=0 (and LSTREAM_CUDA_SYNC=1, which checks every
 * launch) runs every part directly.
 */
#include <string.h>

#include "lstm_cuda.h"

/* The entry of key, or NULL. */
static cuda_graph_t *graph_find(cuda_ctx_t *c, const void *key, size_t bytes) {
  for (int i = 0; i < GRAPHS; i++) {
    cuda_graph_t *const g = &c->graphs[i];
    if (g->used > 0 && g->key_bytes == bytes && !memcmp(g->key, key, bytes)) return g;
  }
  return NULL;
}

static void graph_drop(cuda_graph_t *g) {
  if (g->exec != NULL) (void)cudaGraphExecDestroy(g->exec);
  memset(g, 0, sizeof *g);
}

/* A free entry for key, or the least recently used one, emptied. */
static cuda_graph_t *graph_slot(cuda_ctx_t *c, const void *key, size_t bytes) {
  cuda_graph_t *g = &c->graphs[0];
  for (int i = 1; i < GRAPHS && g->used > 0; i++)
    if (c->graphs[i].used < g->used) g = &c->graphs[i];
  graph_drop(g);
  memcpy(g->key, key, bytes);
  g->key_bytes = bytes;
  return g;
}

/* Records what queue(opaque) queues on the context's stream into g->exec;
 * nothing runs. On an error the capture is ended and dropped. */
static ls_err_t graph_record(cuda_ctx_t *c, cuda_graph_t *g, ls_err_t (*queue)(void *),
                             void *opaque) {
  CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
  ls_err_t const err = queue(opaque);
  cudaGraph_t graph = NULL;
  cudaError_t const end = cudaStreamEndCapture(c->stream, &graph);
  if (err != LS_OK) {
    if (graph != NULL) (void)cudaGraphDestroy(graph);
    return err;
  }
  if (end != cudaSuccess) return cuda_fail("cudaStreamEndCapture", end);
  cudaError_t const inst = cudaGraphInstantiate(&g->exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    g->exec = NULL;
    return cuda_fail("cudaGraphInstantiate", inst);
  }
  return LS_OK;
}

ls_err_t graph_run(void *ctx, const void *key, size_t key_bytes, ls_err_t (*queue)(void *),
                   void *opaque) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  if (c->graphs_off || key_bytes > GRAPH_KEY) return queue(opaque);
  cuda_graph_t *g = graph_find(c, key, key_bytes);
  c->graph_uses++;
  if (g == NULL) { /* first seen: noted, run directly */
    graph_slot(c, key, key_bytes)->used = c->graph_uses;
    return queue(opaque);
  }
  g->used = c->graph_uses;
  if (g->exec == NULL) {
    ls_err_t const err = graph_record(c, g, queue, opaque);
    if (err != LS_OK) {
      graph_drop(g);
      return err;
    }
  }
  CUDA_CHECK(cudaGraphLaunch(g->exec, c->stream));
  return LS_OK;
}

void graph_free_all(cuda_ctx_t *c) {
  for (int i = 0; i < GRAPHS; i++)
    graph_drop(&c->graphs[i]);
}
