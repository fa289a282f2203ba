/*
 * The HTTP server of /metrics and /health (train/http.h) on
 * libmicrohttpd.
 */
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

struct http_server_s {
  struct MHD_Daemon *d;
  http_render_fn render;
  void *opaque;
  char url[96];
};

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

static enum MHD_Result answer(struct MHD_Connection *c, int status, const char *type, char *body,
                              size_t len, const char *allow, int keep) {
  struct MHD_Response *const r = MHD_create_response_from_buffer(
      len, body, body != NULL && !keep ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (r == NULL) {
    if (!keep) free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (allow != NULL) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  enum MHD_Result const ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

/* A fixed text body (copied, so that every answer's body is freed alike). */
static enum MHD_Result answer_text(struct MHD_Connection *c, int status, const char *text,
                                   const char *allow) {
  char *const body = strdup(text);
  return answer(c, status, "text/plain; charset=utf-8", body, body ? strlen(body) : 0, allow, 0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  http_server_t *const s = cls;
  (void)version, (void)upload_data, (void)upload_data_size, (void)con_cls;
  http_request_t const req = {!strcmp(url, "/metrics")  ? HTTP_METRICS
                              : !strcmp(url, "/health") ? HTTP_HEALTH
                                                        : HTTP_OTHER,
                              url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "series")};
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n",
                       "GET, HEAD");
  http_reply_t reply = {0};
  s->render(s->opaque, &req, &reply);
  if (reply.status == 0)
    return answer_text(c, MHD_HTTP_NOT_FOUND, "not found: try /, /metrics or /health\n", NULL);
  if (reply.body == NULL)
    return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
  return answer(c, reply.status, reply.type, reply.body, reply.len, NULL, reply.keep);
}

/* ------------------------------------------------------------------------ */
/* The daemon                                                                */

/* Parses "[ADDR:]PORT" into *addr (IPv4 or IPv6) and *port. */
static ls_err_t parse_spec(const char *spec, struct sockaddr_storage *addr, int *port) {
  char host[64] = "127.0.0.1";
  const char *port_text = spec;
  const char *const colon = strrchr(spec, ':');
  if (colon != NULL) {
    const char *h = spec;
    size_t n = (size_t)(colon - spec);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') h++, n -= 2; /* [v6]:PORT */
    LS_RETURN_IF(n == 0 || n >= sizeof host, LS_ERR_INVALID_ARG,
                 "--http '%s': expected [ADDR:]PORT", spec);
    memcpy(host, h, n);
    host[n] = '\0';
    port_text = colon + 1;
  }
  char *end = NULL;
  long const p = strtol(port_text, &end, 10);
  LS_RETURN_IF(end == port_text || *end != '\0' || p < 0 || p > 65535, LS_ERR_INVALID_ARG,
               "--http '%s': the port must be a number in [0, 65535] (0: any free port)", spec);
  *port = (int)p;
  memset(addr, 0, sizeof *addr);
  struct sockaddr_in *const v4 = (struct sockaddr_in *)addr;
  struct sockaddr_in6 *const v6 = (struct sockaddr_in6 *)addr;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1)
    v4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1)
    v6->sin6_family = AF_INET6;
  else
    return ls_error_set(LS_ERR_INVALID_ARG,
                        "--http '%s': '%s' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, "
                        "0.0.0.0, [::1])",
                        spec, host);
  return LS_OK;
}

static void set_port(struct sockaddr_storage *addr, int port) {
  if (addr->ss_family == AF_INET)
    ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)port);
}

ls_err_t http_server_new(const char *spec, int offset, http_render_fn render, void *opaque,
                         http_server_t **out) {
  LS_RETURN_IF(spec == NULL || render == NULL || out == NULL || offset < 0, LS_ERR_INVALID_ARG,
               "http_server_new: spec, render and out must not be NULL, offset not negative");
  *out = NULL;
  struct sockaddr_storage addr;
  int port = 0;
  LS_FORWARD_IF_ERROR(parse_spec(spec, &addr, &port));
  if (port > 0) port += offset; /* each rank on PORT + rank */
  LS_RETURN_IF(port > 65535, LS_ERR_INVALID_ARG,
               "--http '%s': port %d (PORT + rank %d) is above 65535", spec, port, offset);
  set_port(&addr, port);
  http_server_t *const s = calloc(1, sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for the HTTP server");
  s->render = render;
  s->opaque = opaque;
  unsigned const flags =
      MHD_USE_AUTO_INTERNAL_THREAD | (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  s->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                          (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                          (unsigned)HTTP_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                          (unsigned)HTTP_PER_ADDRESS, MHD_OPTION_CONNECTION_TIMEOUT,
                          (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                          (size_t)HTTP_MEMORY_BYTES, MHD_OPTION_END);
  if (s->d == NULL) {
    free(s);
    return ls_error_set(LS_ERR_IO,
                        "--http '%s': cannot listen on port %d (taken? under mpirun each rank "
                        "uses PORT + rank)",
                        spec, port);
  }
  const union MHD_DaemonInfo *const info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&addr)->sin_addr, host, sizeof host);
  else
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&addr)->sin6_addr, host, sizeof host);
  snprintf(s->url, sizeof s->url, addr.ss_family == AF_INET6 ? "http://[%s]:%u" : "http://%s:%u",
           host, info != NULL ? (unsigned)info->port : (unsigned)port);
  *out = s;
  return LS_OK;
}

void http_server_destroy(http_server_t *s) {
  if (s == NULL) return;
  MHD_stop_daemon(s->d);
  free(s);
}

const char *http_server_url(const http_server_t *s) {
  return s == NULL ? "" : s->url;
}
