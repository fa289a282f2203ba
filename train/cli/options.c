/*
 * Command-line options (train/cli/cli.h, "Options"): every command's
 * options are one table of cli_opt_t, parsed with getopt_long (--name VALUE
 * and --name=VALUE alike, -X VALUE) and printed as its --help. Values are
 * read by the ground floor's typed values (include/base/value.h), as the
 * library's configuration keys are.
 */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's val for table entry i: above every short option. */
#define LONG_BASE 256

static int opt_count(const cli_opt_t *opts) {
  int n = 0;
  while (opts[n].name != NULL || opts[n].short_name != 0 || opts[n].help != NULL)
    n++;
  return n;
}

/* A heading of the help, not an option. */
static int is_heading(const cli_opt_t *o) {
  return o->name == NULL && o->short_name == 0;
}

/* "--name" or "-X", for messages. */
static void opt_name(const cli_opt_t *o, char *buf, size_t size) {
  if (o->name != NULL)
    snprintf(buf, size, "--%s", o->name);
  else
    snprintf(buf, size, "-%c", o->short_name);
}

/* ------------------------------------------------------------------------ */
/* Help                                                                      */

/* "--name ARG" or "-X, --name ARG" of an option. */
static void opt_label(const cli_opt_t *o, char *buf, size_t size) {
  int n = 0;
  if (o->short_name && o->name != NULL)
    n = snprintf(buf, size, "-%c, --%s", o->short_name, o->name);
  else
    n = o->name != NULL ? snprintf(buf, size, "--%s", o->name)
                        : snprintf(buf, size, "-%c", o->short_name);
  snprintf(buf + n, size - (size_t)n, "%s%s", o->arg ? " " : "", o->arg ? o->arg : "");
}

/* The default an option shows in its help, "" for none. */
static void opt_default(const cli_opt_t *o, char *buf, size_t size) {
  buf[0] = '\0';
  if (o->def != NULL)
    snprintf(buf, size, "%s", o->def);
  else if (o->kind == CLI_VALUE && !(o->flags & CLI_NO_DEFAULT) && o->dst != NULL)
    (void)base_value_format(&o->value, o->dst, buf, size);
}

/* One option: its label, then its help lines in a column, the default after
 * the last. */
static void help_opt(FILE *f, const cli_opt_t *o, int col) {
  char label[96], def[96];
  opt_label(o, label, sizeof label);
  opt_default(o, def, sizeof def);
  fprintf(f, "  %-*s", col, label);
  if ((int)strlen(label) > col) fprintf(f, "\n  %-*s", col, "");
  for (const char *h = o->help; h != NULL;) {
    const char *const nl = strchr(h, '\n');
    int const len = nl ? (int)(nl - h) : (int)strlen(h);
    fprintf(f, "  %.*s", len, h);
    if (nl == NULL) break;
    fprintf(f, "\n  %-*s", col, "");
    h = nl + 1;
  }
  fprintf(f, "%s%s%s\n", def[0] ? " (default " : "", def, def[0] ? ")" : "");
}

void cli_help(FILE *f, const cli_spec_t *spec) {
  fprintf(f, "Usage: lstream %s%s%s\n", spec->cmd, spec->cmd[0] ? " " : "", spec->usage);
  if (spec->about != NULL) fprintf(f, "\n%s", spec->about);
  int const n = opt_count(spec->opts);
  int col = 10; /* "-h, --help" */
  for (int i = 0; i < n; i++) {
    char label[96];
    if (is_heading(&spec->opts[i]) || (spec->opts[i].flags & CLI_HIDDEN)) continue;
    opt_label(&spec->opts[i], label, sizeof label);
    int const len = (int)strlen(label);
    if (len > col && len <= 24) col = len;
  }
  fprintf(f, "\n%s", n > 0 && is_heading(&spec->opts[0]) ? "" : "Options:\n");
  for (int i = 0; i < n; i++) {
    const cli_opt_t *const o = &spec->opts[i];
    if (is_heading(o))
      fprintf(f, "%s%s\n", i > 0 ? "\n" : "", o->help);
    else if (!(o->flags & CLI_HIDDEN))
      help_opt(f, o, col);
  }
  fprintf(f, "  %-*s  this text\n", col, "-h, --help");
  if (spec->epilog != NULL) fprintf(f, "\n%s", spec->epilog);
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */

/* Applies one option's value (NULL for a flag). */
static int apply(const cli_spec_t *spec, const cli_opt_t *o, const char *value) {
  char name[64];
  opt_name(o, name, sizeof name);
  if (o->seen != NULL && *o->seen == NULL) *o->seen = o->name;
  switch (o->kind) {
  case CLI_FLAG: *(int *)o->dst = 1; return CLI_EXIT_OK;
  case CLI_TEXT: *(const char **)o->dst = value; return CLI_EXIT_OK;
  case CLI_CALL: return o->call(o->dst, value);
  case CLI_VALUE: break;
  }
  int const rc = base_value_parse(&o->value, value, o->dst);
  if (rc == -2) return cli_fail(LS_ERR_NOMEM, "no memory for %s", name);
  if (rc != 0) {
    char expected[160];
    base_value_expected(&o->value, expected, sizeof expected);
    return cli_usage_error(spec->cmd, "%s '%s': expected %s", name, value, expected);
  }
  return CLI_EXIT_OK;
}

/* The name of a long option as given in arg ("--name" or "--name=..."):
 * getopt_long also takes unambiguous abbreviations, which are refused. */
static int spelled_whole(const char *arg, const char *name) {
  size_t const n = strlen(name);
  return !strncmp(arg, "--", 2) && !strncmp(arg + 2, name, n) &&
         (arg[2 + n] == '\0' || arg[2 + n] == '=');
}

/* getopt_long's tables for spec: long options [n + 1] and the short ones. */
static void build(const cli_spec_t *spec, int n, struct option *longs, char *shorts) {
  char *s = shorts;
  *s++ = '-'; /* positional arguments in order, as option 1 */
  *s++ = ':'; /* ':' for a missing value */
  *s++ = 'h';
  int k = 0;
  for (int i = 0; i < n; i++) {
    const cli_opt_t *const o = &spec->opts[i];
    if (o->name != NULL)
      longs[k++] = (struct option){o->name, o->kind == CLI_FLAG ? no_argument : required_argument,
                                   NULL, LONG_BASE + i};
    if (o->short_name) {
      *s++ = (char)o->short_name;
      if (o->kind != CLI_FLAG) *s++ = ':';
    }
  }
  longs[k++] = (struct option){"help", no_argument, NULL, 'h'};
  longs[k] = (struct option){NULL, 0, NULL, 0};
  *s = '\0';
}

/* The entry of a short option. */
static const cli_opt_t *by_short(const cli_spec_t *spec, int n, int c) {
  for (int i = 0; i < n; i++)
    if (spec->opts[i].short_name == c) return &spec->opts[i];
  return NULL;
}

/* A positional argument, argv[at]; a dispatcher's first one ends the
 * parsing (*stop). */
static int positional(const cli_spec_t *spec, cli_args_t *args, char **argv, int at, int *stop) {
  if (spec->positional == CLI_SUBCOMMAND) {
    args->sub = at;
    *stop = 1;
    return CLI_EXIT_OK;
  }
  if (args->n >= spec->positional || args->n >= CLI_MAX_POSITIONAL)
    return cli_usage_error(spec->cmd, "unexpected argument '%s'", argv[at]);
  args->pos[args->n++] = argv[at];
  return CLI_EXIT_OK;
}

/* Checks that every required option was given. */
static int check_required(const cli_spec_t *spec, int n, const unsigned char *given) {
  for (int i = 0; i < n; i++)
    if ((spec->opts[i].flags & CLI_REQUIRED) && !given[i]) {
      char name[64];
      opt_name(&spec->opts[i], name, sizeof name);
      return cli_usage_error(spec->cmd, "%s is required", name);
    }
  return CLI_EXIT_OK;
}

/* A message for a token getopt_long refused: a flag given a value, or an
 * unknown option. */
static int refused(const cli_spec_t *spec, int n, const char *arg) {
  const char *const eq = strchr(arg, '=');
  for (int i = 0; eq != NULL && !strncmp(arg, "--", 2) && i < n; i++) {
    const cli_opt_t *const o = &spec->opts[i];
    if (o->name != NULL && o->kind == CLI_FLAG && strlen(o->name) == (size_t)(eq - arg - 2) &&
        !strncmp(arg + 2, o->name, strlen(o->name)))
      return cli_usage_error(spec->cmd, "option '--%s' takes no value", o->name);
  }
  return cli_usage_error(spec->cmd, "unknown option '%s'", arg);
}

/* One getopt_long result c for the token at argv[at]. */
static int handle(const cli_spec_t *spec, int n, int c, char **argv, int at, unsigned char *given) {
  if (c == 'h' && (strncmp(argv[at], "--", 2) != 0 || !strcmp(argv[at], "--help"))) {
    cli_help(stdout, spec);
    return CLI_DONE;
  }
  if (c == ':') return cli_usage_error(spec->cmd, "option '%s' needs a value", argv[at]);
  const cli_opt_t *o = c >= LONG_BASE ? &spec->opts[c - LONG_BASE] : by_short(spec, n, c);
  if (c == '?' || o == NULL || (c >= LONG_BASE && !spelled_whole(argv[at], o->name)))
    return refused(spec, n, argv[at]);
  given[o - spec->opts] = 1;
  return apply(spec, o, o->kind == CLI_FLAG ? NULL : optarg);
}

int cli_parse(const cli_spec_t *spec, int argc, char **argv, cli_args_t *args) {
  int const n = opt_count(spec->opts);
  struct option *const longs = calloc((size_t)n + 2, sizeof *longs);
  char *const shorts = malloc(2 * (size_t)n + 8);
  unsigned char *const given = calloc((size_t)n + 1, 1);
  *args = (cli_args_t){.sub = 0};
  int rc = longs && shorts && given ? CLI_EXIT_OK : cli_fail(LS_ERR_NOMEM, "no memory");
  if (rc == CLI_EXIT_OK) build(spec, n, longs, shorts);
  opterr = 0;
  optind = 0; /* a full reset: commands nest (lstream bench engine) */
  int stop = 0;
  while (rc == CLI_EXIT_OK && !stop) {
    int const at = optind > 0 ? optind : 1;
    int const c = getopt_long(argc, argv, shorts, longs, NULL);
    if (c == -1) break;
    rc = c == 1 ? positional(spec, args, argv, at, &stop) : handle(spec, n, c, argv, at, given);
  }
  /* After "--": the rest are positional. */
  for (int i = optind; rc == CLI_EXIT_OK && !stop && i < argc; i++)
    rc = positional(spec, args, argv, i, &stop);
  if (rc == CLI_EXIT_OK) rc = check_required(spec, n, given);
  free(longs), free(shorts), free(given);
  return rc;
}
