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

/* Forks argv with stdin/stdout/stderr on the given fds (-1: /dev/null). */
static pid_t spawn(const char *const argv[], int in_fd, int out_fd, int err_fd) {
  pid_t const pid = fork();
  if (pid != 0) return pid;
  int const devnull = open("/dev/null", O_RDWR);
  dup2(in_fd >= 0 ? in_fd : devnull, 0);
  dup2(out_fd >= 0 ? out_fd : devnull, 1);
  dup2(err_fd >= 0 ? err_fd : devnull, 2);
  for (int fd = 3; fd < 256; fd++)
    close(fd);
  execvp(argv[0], (char *const *)argv);
  _exit(127);
}

/* Appends what is readable on fd to *buf; returns 0 at EOF. */
static int drain(int fd, char **buf, size_t *len, size_t *cap) {
  if (*cap - *len < 65536) {
    *cap = 2 * *cap + 65536;
    *buf = realloc(*buf, *cap + 1);
  }
  ssize_t const n = read(fd, *buf + *len, *cap - *len);
  if (n > 0) *len += (size_t)n;
  (*buf)[*len] = '\0';
  return n != 0 && !(n < 0 && errno != EINTR && errno != EAGAIN);
}

int proc_run(const char *const argv[], const char *input, double timeout_s, proc_result_t *res) {
  memset(res, 0, sizeof *res);
  res->status = -1;
  int in[2], out[2], err[2];
  if (pipe(in) || pipe(out) || pipe(err)) return -1;
  pid_t const pid = spawn(argv, in[0], out[1], err[1]);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) return -1;
  signal(SIGPIPE, SIG_IGN); /* a child that does not read its input */
  if (input != NULL) (void)!write(in[1], input, strlen(input));
  close(in[1]);
  double const deadline = now_s() + timeout_s;
  size_t cap[2] = {0, 0}, err_len = 0;
  int open_fds = 2;
  struct pollfd pfd[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
  while (open_fds > 0 && left_ms(deadline) > 0) {
    if (poll(pfd, 2, left_ms(deadline)) <= 0) continue;
    if (pfd[0].revents && !drain(out[0], &res->out, &res->out_len, &cap[0]))
      pfd[0].fd = -1, open_fds--;
    if (pfd[1].revents && !drain(err[0], &res->err, &err_len, &cap[1])) pfd[1].fd = -1, open_fds--;
  }
  close(out[0]);
  close(err[0]);
  if (res->out == NULL) res->out = calloc(1, 1);
  if (res->err == NULL) res->err = calloc(1, 1);
  res->status = wait_until(pid, deadline);
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
  int out[2];
  memset(b, 0, sizeof *b);
  if (pipe(out)) return -1;
  b->pid = spawn(argv, -1, out[1], -1);
  close(out[1]);
  b->out_fd = out[0];
  if (b->pid < 0) return -1;
  /* Read up to the first newline. */
  double const deadline = now_s() + 20.0;
  size_t len = 0;
  while (len < sizeof b->addr - 1 && left_ms(deadline) > 0) {
    struct pollfd pfd = {.fd = b->out_fd, .events = POLLIN};
    if (poll(&pfd, 1, left_ms(deadline)) <= 0) continue;
    ssize_t const r = read(b->out_fd, b->addr + len, 1);
    if (r <= 0) break;
    if (b->addr[len] == '\n') {
      b->addr[len] = '\0';
      return len > 0 ? 0 : -1;
    }
    len++;
  }
  proc_broker_stop(b);
  return -1;
}

int proc_broker_stop(proc_broker_t *b) {
  if (b->pid <= 0) return -1;
  kill(b->pid, SIGTERM);
  int const status = wait_until(b->pid, now_s() + 20.0);
  close(b->out_fd);
  b->pid = 0;
  return status;
}
