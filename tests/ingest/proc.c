/*
 * Child programs for the ingest tests (tests/ingest/proc.h).
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds left before deadline (at least 0). */
static int left_ms(double deadline) {
  double const left = deadline - now_s();
  return left > 0 ? (int)(left * 1000.0) + 1 : 0;
}

/* Waits for pid until deadline; kills it past that. Returns its exit code or
 * -1. */
static int wait_until(pid_t pid, double deadline) {
  int st = 0;
  for (;;) {
    pid_t const r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (left_ms(deadline) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    struct timespec const ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int proc_start(proc_child_t *c, const char *const argv[]) {
  int in[2], out[2], err[2];
  c->pid = -1;
  c->in_fd = c->out_fd = c->err_fd = -1;
  if (pipe(in)) return -1;
  if (pipe(out)) {
    close(in[0]), close(in[1]);
    return -1;
  }
  if (pipe(err)) {
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    return -1;
  }
  c->pid = fork();
  if (c->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd = 3; fd < 256; fd++)
      close(fd);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(in[0]), close(out[1]), close(err[1]);
  if (c->pid < 0) {
    close(in[1]), close(out[0]), close(err[0]);
    return -1;
  }
  c->in_fd = in[1], c->out_fd = out[0], c->err_fd = err[0];
  signal(SIGPIPE, SIG_IGN); /* a child that does not read its input */
  return 0;
}

int proc_read_line(int fd, char *line, size_t size, double timeout_s) {
  double const deadline = now_s() + timeout_s;
  for (size_t len = 0; len + 1 < size && left_ms(deadline) > 0;) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, left_ms(deadline)) <= 0) continue;
    if (read(fd, line + len, 1) != 1) return -1;
    if (line[len] == '\n') {
      line[len] = '\0';
      return 0;
    }
    len++;
  }
  return -1;
}

/* Appends what is readable on fd to *buf; returns 0 at EOF or on error. */
static int drain(int fd, char **buf, size_t *len, size_t *cap) {
  if (*cap - *len < 65536) {
    *cap = 2 * *cap + 65536;
    *buf = realloc(*buf, *cap + 1);
  }
  ssize_t const n = read(fd, *buf + *len, *cap - *len);
  if (n > 0) *len += (size_t)n;
  (*buf)[*len] = '\0';
  return n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN));
}

void proc_finish(proc_child_t *c, double timeout_s, proc_result_t *res) {
  proc_result_t local;
  if (res == NULL) res = &local;
  memset(res, 0, sizeof *res);
  close(c->in_fd);
  double const deadline = now_s() + timeout_s;
  size_t cap[2] = {0, 0}, err_len = 0;
  struct pollfd pfd[2] = {{.fd = c->out_fd, .events = POLLIN}, {.fd = c->err_fd, .events = POLLIN}};
  while ((pfd[0].fd >= 0 || pfd[1].fd >= 0) && left_ms(deadline) > 0) {
    if (poll(pfd, 2, left_ms(deadline)) <= 0) continue;
    if (pfd[0].revents && !drain(c->out_fd, &res->out, &res->out_len, &cap[0])) pfd[0].fd = -1;
    if (pfd[1].revents && !drain(c->err_fd, &res->err, &err_len, &cap[1])) pfd[1].fd = -1;
  }
  close(c->out_fd);
  close(c->err_fd);
  if (res->out == NULL) res->out = calloc(1, 1);
  if (res->err == NULL) res->err = calloc(1, 1);
  res->status = wait_until(c->pid, deadline);
  c->pid = -1;
  if (res == &local) proc_result_free(&local);
}

int proc_run(const char *const argv[], const char *input, double timeout_s, proc_result_t *res) {
  proc_child_t c;
  memset(res, 0, sizeof *res);
  res->status = -1;
  if (proc_start(&c, argv) != 0) return -1;
  if (input != NULL) (void)!write(c.in_fd, input, strlen(input));
  proc_finish(&c, timeout_s, res);
  return 0;
}

void proc_result_free(proc_result_t *res) {
  free(res->out);
  free(res->err);
  memset(res, 0, sizeof *res);
}

int proc_broker_start(proc_broker_t *b, const char *lstream, const char *const args[]) {
  const char *argv[64] = {lstream, "broker"};
  int n = 2;
  for (int i = 0; args != NULL && args[i] != NULL && n < 63; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  memset(b, 0, sizeof *b);
  if (proc_start(&b->child, argv) != 0) return -1;
  if (proc_read_line(b->child.out_fd, b->addr, sizeof b->addr, 20.0) == 0 && b->addr[0] != '\0')
    return 0;
  proc_broker_stop(b);
  return -1;
}

int proc_broker_stop(proc_broker_t *b) {
  if (b->child.pid <= 0) return -1;
  kill(b->child.pid, SIGTERM);
  proc_result_t res;
  proc_finish(&b->child, 20.0, &res);
  int const status = res.status;
  proc_result_free(&res);
  return status;
}
