/*
 * A small HTTP server for /metrics and /health (train/ internal):
 * libmicrohttpd with one internal thread polling every connection
 * (non-blocking sockets), so a slow or idle client holds a connection slot,
 * never the thread. Limits: HTTP_MAX_CONNECTIONS at once, HTTP_PER_ADDRESS
 * of them from one client address (the next is closed as it is accepted),
 * HTTP_TIMEOUT_S of inactivity before a connection is closed,
 * HTTP_MEMORY_BYTES per connection (a larger request head is refused).
 * A client that trickles a request a byte at a time stays within the
 * timeout: what bounds it is the per-address count, so that slow clients
 * from one address (80 in issue 23's probe) hold 16 slots and /health
 * still answers at once. GET and HEAD of /metrics, /health and what the
 * renderer serves (the live page, train/page.h); any other path is 404,
 * any other method 405.
 */
#ifndef LSTREAM_TRAIN_HTTP_H
#define LSTREAM_TRAIN_HTTP_H

#include <stddef.h>

#include "lstream/error.h"

#define HTTP_MAX_CONNECTIONS 256
#define HTTP_PER_ADDRESS     16
#define HTTP_TIMEOUT_S       10
#define HTTP_MEMORY_BYTES    (32 * 1024)

typedef enum http_page_e { HTTP_METRICS, HTTP_HEALTH, HTTP_OTHER } http_page_t;

/* A GET or HEAD request: its page, path and ?series= argument (NULL). */
typedef struct http_request_s {
  http_page_t page;
  const char *url;
  const char *series;
} http_request_t;

/* A response: status, content type (static), body (malloc'd: the server
 * frees it; keep: static, not freed). */
typedef struct http_reply_s {
  int status;
  const char *type;
  char *body;
  size_t len;
  int keep;
} http_reply_t;

/* Renders a page on the server's thread; on failure it leaves body NULL
 * (the server answers 500); status 0 for a path it does not serve (404). */
typedef void (*http_render_fn)(void *opaque, const http_request_t *req, http_reply_t *out);

typedef struct http_server_s http_server_t;

/* Parses spec "[ADDR:]PORT" ("9100", "0.0.0.0:9100", "[::1]:9100";
 * 127.0.0.1 without ADDR) and listens on PORT + offset (PORT 0: any free
 * port, offset ignored). render serves both pages. */
ls_err_t http_server_new(const char *spec, int offset, http_render_fn render, void *opaque,
                         http_server_t **out);

/* Stops the thread and closes every connection; accepts NULL. */
void http_server_destroy(http_server_t *s);

/* "http://ADDR:PORT", with the port bound. */
const char *http_server_url(const http_server_t *s);

#endif /* LSTREAM_TRAIN_HTTP_H */
