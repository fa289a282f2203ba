/*
 * A loopback TCP relay for the embedded broker's fixed bootstrap port
 * (ingest/relay.h). One thread polls the listening socket, a wake-up pipe and
 * both ends of every relayed connection; sockets are non-blocking, and each
 * direction has one buffer that is drained before more is read.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { RELAY_BUF = 64 * 1024, RELAY_MAX_TARGETS = 64 };

/* One relayed connection. Side 0 is the client, side 1 the broker; buf[i]
 * holds bytes read from fd[i] that are not yet written to fd[1 - i]. */
typedef struct relay_pair_s {
  int fd[2];
  size_t len[2], off[2];
  char buf[2][RELAY_BUF];
} relay_pair_t;

struct relay_s {
  int listen_fd;
  int wake[2]; /* a pipe: relay_destroy writes a byte to stop the thread */
  pthread_t thread;
  struct sockaddr_storage targets[RELAY_MAX_TARGETS];
  socklen_t target_lens[RELAY_MAX_TARGETS];
  int n_targets;
  relay_pair_t **pairs;
  int n_pairs, cap_pairs;
  struct pollfd *pfds; /* 2 + 2 * cap_pairs */
};

/* ------------------------------------------------------------------------ */

static ls_err_t relay_parse_targets(relay_t *r, const char *targets) {
  char *const copy = strdup(targets);
  LS_RETURN_IF(copy == NULL, LS_ERR_NOMEM, "relay: copying the target list");
  ls_err_t err = LS_OK;
  char *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t != NULL && err == LS_OK;
       t = strtok_r(NULL, ",", &save)) {
    char *const colon = strrchr(t, ':');
    if (colon == NULL || r->n_targets == RELAY_MAX_TARGETS) {
      err = ls_error_set(LS_ERR_INVALID_ARG, "relay: bad target '%s' (want host:port, at most %d)",
                         t, RELAY_MAX_TARGETS);
      break;
    }
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int const rc = getaddrinfo(t, colon + 1, &hints, &ai);
    if (rc != 0) {
      err = ls_error_set(LS_ERR_INVALID_ARG, "relay: cannot resolve '%s:%s': %s", t, colon + 1,
                         gai_strerror(rc));
      break;
    }
    memcpy(&r->targets[r->n_targets], ai->ai_addr, ai->ai_addrlen);
    r->target_lens[r->n_targets++] = ai->ai_addrlen;
    freeaddrinfo(ai);
  }
  free(copy);
  LS_FORWARD_IF_ERROR(err);
  LS_RETURN_IF(r->n_targets == 0, LS_ERR_INVALID_ARG, "relay: empty target list '%s'", targets);
  return LS_OK;
}

/* A non-blocking connection to the first target that accepts, or -1. */
static int relay_connect_upstream(const relay_t *r) {
  for (int i = 0; i < r->n_targets; i++) {
    int const fd = socket(r->targets[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* Loopback connects complete or fail at once: connect blocking. */
    if (connect(fd, (const struct sockaddr *)&r->targets[i], r->target_lens[i]) == 0 &&
        fcntl(fd, F_SETFL, O_NONBLOCK) == 0)
      return fd;
    close(fd);
  }
  return -1;
}

static void relay_accept(relay_t *r) {
  int const client = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (client < 0) return;
  if (r->n_pairs == r->cap_pairs) {
    int const cap = r->cap_pairs ? 2 * r->cap_pairs : 8;
    relay_pair_t **const pairs = realloc(r->pairs, (size_t)cap * sizeof *pairs);
    if (pairs != NULL) r->pairs = pairs;
    struct pollfd *const pfds = realloc(r->pfds, (size_t)(2 + 2 * cap) * sizeof *pfds);
    if (pfds != NULL) r->pfds = pfds;
    if (pairs == NULL || pfds == NULL) {
      close(client);
      return;
    }
    r->cap_pairs = cap;
  }
  relay_pair_t *const p = malloc(sizeof *p);
  int const upstream = p != NULL ? relay_connect_upstream(r) : -1;
  if (upstream < 0) {
    free(p);
    close(client); /* the client sees the refusal as a failed bootstrap */
    return;
  }
  p->fd[0] = client;
  p->fd[1] = upstream;
  p->len[0] = p->len[1] = p->off[0] = p->off[1] = 0;
  r->pairs[r->n_pairs++] = p;
}

static void relay_pair_close(relay_t *r, int k) {
  relay_pair_t *const p = r->pairs[k];
  close(p->fd[0]);
  close(p->fd[1]);
  free(p);
  r->pairs[k] = r->pairs[--r->n_pairs];
}

/* Moves bytes for one pair after poll; returns -1 when the pair is done
 * (either side closed or failed). */
static int relay_pair_pump(relay_pair_t *p, const struct pollfd *pfd) {
  for (int i = 0; i < 2; i++) {
    if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && p->len[i] == 0) {
      ssize_t const n = recv(p->fd[i], p->buf[i], RELAY_BUF, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return -1;
      if (n > 0) {
        p->len[i] = (size_t)n;
        p->off[i] = 0;
      }
    }
  }
  for (int i = 0; i < 2; i++) {
    size_t const pending = p->len[1 - i] - p->off[1 - i];
    if (pending == 0) continue;
    ssize_t const n = send(p->fd[i], p->buf[1 - i] + p->off[1 - i], pending, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
    if (n > 0) p->off[1 - i] += (size_t)n;
    if (p->off[1 - i] == p->len[1 - i]) p->len[1 - i] = p->off[1 - i] = 0;
  }
  return 0;
}

static void *relay_run(void *arg) {
  relay_t *const r = arg;
  for (;;) {
    r->pfds[0] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
    r->pfds[1] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
    for (int k = 0; k < r->n_pairs; k++) {
      const relay_pair_t *const p = r->pairs[k];
      for (int i = 0; i < 2; i++) {
        short const events =
            (short)((p->len[i] == 0 ? POLLIN : 0) | (p->len[1 - i] > 0 ? POLLOUT : 0));
        /* A negative fd is skipped by poll: no busy loop on a hang-up while
         * this side waits for the other to drain. */
        r->pfds[2 + 2 * k + i] = (struct pollfd){.fd = events ? p->fd[i] : -1, .events = events};
      }
    }
    int const n_pairs = r->n_pairs;
    if (poll(r->pfds, (nfds_t)(2 + 2 * n_pairs), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r->pfds[0].revents) break;
    /* Backwards, so that closing pair k (which moves the last pair into
     * slot k) never skips one. */
    for (int k = n_pairs - 1; k >= 0; k--)
      if (relay_pair_pump(r->pairs[k], &r->pfds[2 + 2 * k]) != 0) relay_pair_close(r, k);
    if (r->pfds[1].revents & POLLIN) relay_accept(r);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */

static ls_err_t relay_listen(relay_t *r, int port) {
  r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  LS_RETURN_IF(r->listen_fd < 0, LS_ERR_IO, "relay: socket(): %s", strerror(errno));
  int const on = 1;
  setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in const sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
  LS_RETURN_IF(bind(r->listen_fd, (const struct sockaddr *)&sin, sizeof sin) != 0, LS_ERR_IO,
               "cannot listen on 127.0.0.1:%d: %s (another broker there? pick another port, or "
               "none for a random one)",
               port, strerror(errno));
  LS_RETURN_IF(listen(r->listen_fd, 64) != 0, LS_ERR_IO, "relay: listen() on port %d: %s", port,
               strerror(errno));
  return LS_OK;
}

ls_err_t relay_new(relay_t **out, int port, const char *targets) {
  LS_RETURN_IF(out == NULL || targets == NULL, LS_ERR_INVALID_ARG, "relay: NULL argument");
  *out = NULL;
  LS_RETURN_IF(port < 1 || port > 65535, LS_ERR_INVALID_ARG,
               "relay: port %d is out of range (1..65535)", port);
  relay_t *const r = calloc(1, sizeof *r);
  LS_RETURN_IF(r == NULL, LS_ERR_NOMEM, "relay: allocating the relay");
  r->listen_fd = r->wake[0] = r->wake[1] = -1;
  ls_err_t err = relay_parse_targets(r, targets);
  if (err == LS_OK) err = relay_listen(r, port);
  if (err == LS_OK && pipe2(r->wake, O_CLOEXEC) != 0)
    err = ls_error_set(LS_ERR_IO, "relay: pipe(): %s", strerror(errno));
  if (err == LS_OK && (r->pfds = malloc(2 * sizeof *r->pfds)) == NULL)
    err = ls_error_set(LS_ERR_NOMEM, "relay: allocating poll slots");
  if (err == LS_OK && pthread_create(&r->thread, NULL, relay_run, r) != 0)
    err = ls_error_set(LS_ERR_IO, "relay: cannot start its thread");
  if (err != LS_OK) {
    if (r->listen_fd >= 0) close(r->listen_fd);
    if (r->wake[0] >= 0) close(r->wake[0]);
    if (r->wake[1] >= 0) close(r->wake[1]);
    free(r->pfds);
    free(r);
    return err;
  }
  *out = r;
  return LS_OK;
}

void relay_destroy(relay_t *relay) {
  if (relay == NULL) return;
  char const byte = 0;
  while (write(relay->wake[1], &byte, 1) < 0 && errno == EINTR) {
  }
  pthread_join(relay->thread, NULL);
  while (relay->n_pairs > 0)
    relay_pair_close(relay, relay->n_pairs - 1);
  close(relay->listen_fd);
  close(relay->wake[0]);
  close(relay->wake[1]);
  free(relay->pairs);
  free(relay->pfds);
  free(relay);
}
