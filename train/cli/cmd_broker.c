/*
 * `lstream broker`: hosts the embedded Kafka cluster (librdkafka's mock
 * cluster, ingest's "Embedded broker") for the quick start, examples and
 * tests. Prints the bootstrap address on stdout as one flushed line, and
 * runs until SIGINT or SIGTERM; SIGUSR1 takes every broker (or --outage's
 * one) down, SIGUSR2 brings them back (for tests of a lost cluster).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lstream/produce.h"

#define MAX_TOPICS 64

static volatile sig_atomic_t broker_stop = 0;
static volatile sig_atomic_t broker_toggle = 0; /* SIGUSR1: down, SIGUSR2: up */

static void broker_on_signal(int sig) {
  if (sig == SIGUSR1 || sig == SIGUSR2)
    broker_toggle = sig;
  else
    broker_stop = sig;
}

#define ABOUT                                                                                      \
  "Hosts an embedded Kafka cluster for development and tests (librdkafka's mock\n"                 \
  "cluster: the real Kafka protocol on 127.0.0.1, reachable by any client, kcat\n"                 \
  "included). Prints its bootstrap address on stdout as one line, then runs until\n"               \
  "SIGINT (Ctrl-C) or SIGTERM, and exits 0. Everything in it is lost on exit.\n"                   \
  "SIGUSR1 takes every broker down (listeners and connections closed, records\n"                   \
  "kept; --outage: one), SIGUSR2 brings them back on the same ports: a lost\n"                     \
  "cluster, or a lost leader, for tests.\n"

#define EPILOG                                                                                     \
  "Partition p of a --topic is led by broker 1 + p % N, the same every run. A\n"                   \
  "broker taken down stays the leader of its partitions: with --outage 1 and\n"                    \
  "--brokers 2, clients bootstrap through broker 2 and cannot reach broker 1's\n"                  \
  "(partitions 0, 2, ...).\n"                                                                      \
  "\n"                                                                                             \
  "Limits of the mock: about 5 MiB of record batches per partition (the oldest are\n"              \
  "dropped silently beyond that: use many partitions and lz4 for big topics, and\n"                \
  "check low watermarks), fetches served by one thread, no SSL/SASL.\n"                            \
  "\n"                                                                                             \
  "In a script:\n"                                                                                 \
  "  lstream broker --topic ticks:16 --bootstrap-file /tmp/bootstrap &\n"                          \
  "  while [ ! -s /tmp/bootstrap ]; do sleep 0.1; done; BOOTSTRAP=$(cat /tmp/bootstrap)\n"         \
  "or: coproc lstream broker --topic ticks:16; read -r BOOTSTRAP <&\"${COPROC[0]}\"\n"

/* The topics to create (--topic, repeatable). */
typedef struct topics_s {
  char name[MAX_TOPICS][256];
  int partitions[MAX_TOPICS];
  int n;
} topics_t;

/* --topic NAME:PARTITIONS (Kafka names cannot hold ':'). */
static int add_topic(void *opaque, const char *spec) {
  topics_t *const t = opaque;
  static const base_value_t parts = BASE_V_INT(1, LS_BROKER_MAX_PARTITIONS);
  if (t->n == MAX_TOPICS)
    return cli_usage_error("broker", "at most %d --topic options", MAX_TOPICS);
  const char *const colon = strrchr(spec, ':');
  if (colon == NULL || colon == spec || (size_t)(colon - spec) >= sizeof t->name[0] ||
      base_value_parse(&parts, colon + 1, &t->partitions[t->n]) != 0)
    return cli_usage_error("broker", "--topic '%s': expected NAME:PARTITIONS, 1..%d partitions",
                           spec, LS_BROKER_MAX_PARTITIONS);
  memcpy(t->name[t->n], spec, (size_t)(colon - spec));
  t->name[t->n][colon - spec] = '\0';
  t->n++;
  return CLI_EXIT_OK;
}

/* Writes text + "\n" to path through path.tmp.PID, fsync and rename. */
static int broker_write_file(const char *path, const char *text) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
    return cli_fail(LS_OK, "--bootstrap-file path is too long");
  FILE *const f = fopen(tmp, "w");
  if (f == NULL) {
    perror(tmp);
    return cli_fail(LS_OK, "cannot write the bootstrap file (does its directory exist?)");
  }
  int const ok = fprintf(f, "%s\n", text) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
    perror(path);
    unlink(tmp);
    return cli_fail(LS_OK, "cannot write the bootstrap file");
  }
  return CLI_EXIT_OK;
}

/* The brokers SIGUSR1 takes down and SIGUSR2 up: one (its id), or every one
 * (0), in the cluster's n. */
static void broker_toggle_some(ls_broker_t *broker, int n_brokers, int which, int down) {
  int const first = which > 0 ? which : 1, last = which > 0 ? which : n_brokers;
  for (int id = first; id <= last; id++) {
    ls_err_t const err = down ? ls_broker_set_down(broker, id) : ls_broker_set_up(broker, id);
    if (err != LS_OK)
      cli_log(CLI_ERROR, "lstream broker", "cannot bring broker %d %s: %s", id,
              down ? "down" : "up", ls_last_error());
  }
  if (which > 0)
    cli_log(CLI_INFO, "lstream broker", "broker %d is %s", which,
            down ? "down (SIGUSR1)" : "up (SIGUSR2)");
  else
    cli_log(CLI_INFO, "lstream broker", "%d broker(s) %s", n_brokers, down ? "down" : "up");
}

/* Blocks SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 and installs their handler,
 * before the address is published: a signal sent as soon as it is waits for
 * broker_wait_for_signal. *old receives the mask to wait with. */
static void broker_catch_signals(sigset_t *old) {
  static int const sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
  sigset_t block;
  sigemptyset(&block);
  struct sigaction sa = {.sa_handler = broker_on_signal};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&block, sigs[i]);
  sigprocmask(SIG_BLOCK, &block, old);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
}

/* Waits until SIGINT or SIGTERM, taking brokers down on SIGUSR1 and up on
 * SIGUSR2. The signals stay blocked outside sigsuspend, so none is lost. */
static void broker_wait_for_signal(ls_broker_t *broker, int n_brokers, int which,
                                   const sigset_t *old) {
  while (!broker_stop) {
    sigsuspend(old);
    if (broker_toggle != 0) broker_toggle_some(broker, n_brokers, which, broker_toggle == SIGUSR1);
    broker_toggle = 0;
  }
  sigprocmask(SIG_SETMASK, old, NULL);
}

int cmd_broker(int argc, char **argv) {
  int n_brokers = 1, port = 0, outage = 0;
  const char *bootstrap_file = NULL;
  topics_t topics = {.n = 0};
  char topic_help[160];
  snprintf(topic_help, sizeof topic_help,
           "create a topic (repeatable, up to %d; 1..%d\npartitions). Other topics are "
           "auto-created with 4\npartitions when a client first asks for them.",
           MAX_TOPICS, LS_BROKER_MAX_PARTITIONS);
  /* An option a row or two (clang-format would give each field a line). */
  /* clang-format off */
  cli_opt_t const opts[] = {
      {.name = "brokers", .arg = "N", .kind = CLI_VALUE, .dst = &n_brokers,
       .value = BASE_V_INT(1, LS_BROKER_MAX_BROKERS), .help = "brokers in the cluster, ids 1..N"},
      {.name = "port", .arg = "P", .kind = CLI_VALUE, .dst = &port, .value = BASE_V_INT(1, 65535),
       .flags = CLI_NO_DEFAULT,
       .help = "bootstrap on 127.0.0.1:P (default: the brokers' own\n"
               "random ports). librdkafka 2.0.2 cannot put a mock broker\n"
               "on a chosen port, so P relays each new connection to the\n"
               "first broker that is up; clients then use the brokers'\n"
               "advertised random ports, which works from this machine\n"
               "only. Fails if P is taken."},
      {.name = "outage", .arg = "ID", .kind = CLI_VALUE, .dst = &outage,
       .value = BASE_V_INT(0, LS_BROKER_MAX_BROKERS),
       .help = "the broker SIGUSR1 takes down and SIGUSR2 up;\n0: every broker"},
      {.name = "topic", .arg = "NAME:PARTITIONS", .kind = CLI_CALL, .dst = &topics,
       .call = add_topic, .help = topic_help},
      {.name = "bootstrap-file", .arg = "PATH", .kind = CLI_TEXT, .dst = &bootstrap_file,
       .help = "also write the address to PATH, atomically (a temporary\n"
               "file renamed into place once complete); removed on exit"},
      {0},
  };
  cli_spec_t const spec = {"broker", "[--brokers N] [--port P] [--topic NAME:PARTITIONS]...\n"
                                     "                      [--bootstrap-file PATH] [--outage ID]",
                           ABOUT, opts, EPILOG, 0};
  /* clang-format on */
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc != CLI_EXIT_OK) return rc == CLI_DONE ? CLI_EXIT_OK : rc;

  if (outage > n_brokers) {
    return cli_usage_error("broker", "--outage %d: there are brokers 1..%d only", outage,
                           n_brokers);
  }
  sigset_t old;
  broker_catch_signals(&old);
  ls_broker_t *broker = NULL;
  ls_err_t err = ls_broker_new(&broker, n_brokers, port);
  if (err != LS_OK) return cli_fail(err, "cannot start the embedded broker");
  for (int t = 0; t < topics.n && err == LS_OK; t++)
    err = ls_broker_topic_create(broker, topics.name[t], topics.partitions[t]);
  if (err != LS_OK) {
    ls_broker_destroy(broker);
    return cli_fail(err, "cannot create a topic");
  }
  const char *const bootstrap = ls_broker_bootstrap(broker);
  if (bootstrap_file != NULL && broker_write_file(bootstrap_file, bootstrap) != CLI_EXIT_OK) {
    ls_broker_destroy(broker);
    return CLI_EXIT_FAIL;
  }
  printf("%s\n", bootstrap);
  fflush(stdout);
  cli_log(CLI_INFO, "lstream broker", "%d broker(s) at %s, %d topic(s) created; stop with Ctrl-C",
          n_brokers, bootstrap, topics.n);

  broker_wait_for_signal(broker, n_brokers, outage, &old);

  if (bootstrap_file != NULL) unlink(bootstrap_file);
  ls_broker_destroy(broker);
  cli_log(CLI_INFO, "lstream broker", "stopped (%s)", strsignal(broker_stop));
  return CLI_EXIT_OK;
}
