/*
 * The forecasts' figures as `lstream train` prints them (report.h).
 */
#include "report.h"

#include <math.h>
#include <stdlib.h>

/* Targets shown on a log line. */
#define LOG_TARGETS 8

double report_mean(double sum, double count) {
  return count > 0 ? sum / count : 0.0;
}

void report_add(report_t *r, const ls_step_stats_t *s) {
  if (r->mse == NULL && s->targets > 0) {
    r->mse = calloc((size_t)s->targets, sizeof *r->mse);
    r->base = calloc((size_t)s->targets, sizeof *r->base);
    r->n = calloc((size_t)s->targets, sizeof *r->n);
    if (r->mse == NULL || r->base == NULL || r->n == NULL) {
      report_free(r);
      return;
    }
    r->O = s->targets;
  }
  for (int j = 0; j < r->O && j < s->targets; j++) {
    r->mse[j] += s->target[j].mse_sum;
    r->base[j] += s->target[j].base_sum;
    r->n[j] += s->target[j].count;
  }
}

/* " NAME=m1,m2,...": the means sum / n of the first LOG_TARGETS targets. */
static void list(FILE *out, const char *name, const double *sum, const double *n, int O) {
  fprintf(out, " %s=", name);
  for (int j = 0; j < O && j < LOG_TARGETS; j++)
    fprintf(out, "%s%.6g", j ? "," : "", report_mean(sum[j], n[j]));
}

void report_log_fields(report_t *r, FILE *out) {
  if (r->O == 0) return;
  list(out, "mse_data", r->mse, r->n, r->O);
  list(out, "baseline_data", r->base, r->n, r->O);
  for (int j = 0; j < r->O; j++)
    r->mse[j] = r->base[j] = r->n[j] = 0.0;
}

void report_free(report_t *r) {
  free(r->mse), free(r->base), free(r->n);
  r->mse = r->base = r->n = NULL;
  r->O = 0;
}

/* A JSON number with printf's format fmt, or null when v is NaN or Inf
 * (JSON has neither). */
static const char *json_num(char *buf, size_t size, const char *fmt, double v) {
  if (!isfinite(v)) return "null";
  snprintf(buf, size, fmt, v);
  return buf;
}

/* A step's per-target figures as the field ",\"targets\":[...]". */
static void metrics_targets(FILE *out, const ls_step_stats_t *s) {
  char n[4][32];
  fprintf(out, ",\"targets\":[");
  for (int j = 0; j < s->targets; j++) {
    const ls_target_figures_t *const t = &s->target[j];
    fprintf(out,
            "%s{\"feature\":%d,\"name\":\"%s\",\"count\":%.0f,\"loss\":%s,\"baseline\":%s,\"mse_"
            "data\":%s,"
            "\"baseline_data\":%s}",
            j ? "," : "", t->feature, t->name, t->count,
            json_num(n[0], sizeof n[0], "%.9g", report_mean(t->loss_sum, t->count)),
            json_num(n[1], sizeof n[1], "%.9g", report_mean(t->baseline_sum, t->count)),
            json_num(n[2], sizeof n[2], "%.9g", report_mean(t->mse_sum, t->count)),
            json_num(n[3], sizeof n[3], "%.9g", report_mean(t->base_sum, t->count)));
  }
  fprintf(out, "]");
}

/* A step's figures per horizon (--horizon H > 1) as the field
 * ",\"horizons\":[...]": per target and horizon its MSE and the last
 * value's and the seasonal naive's, data units. */
static void metrics_horizons(FILE *out, const ls_step_stats_t *s) {
  if (s->horizons <= 1 || s->horizon == NULL) return;
  char n[3][32];
  fprintf(out, ",\"horizons\":[");
  for (int k = 0; k < s->horizons * s->targets; k++) {
    const ls_horizon_figures_t *const t = &s->horizon[k];
    fprintf(out,
            "%s{\"h\":%d,\"feature\":%d,\"count\":%.0f,\"mse_data\":%s,\"last_data\":%s,"
            "\"snaive_data\":%s}",
            k ? "," : "", t->h, t->feature, t->count,
            json_num(n[0], sizeof n[0], "%.9g", report_mean(t->mse_sum, t->count)),
            json_num(n[1], sizeof n[1], "%.9g", report_mean(t->last_sum, t->count)),
            json_num(n[2], sizeof n[2], "%.9g", report_mean(t->snaive_sum, t->count)));
  }
  fprintf(out, "]");
}

/* The quantiles' figures (--quantiles): per level, horizon and target, the
 * forecasts whose actual arrived in the step, the share at or below them
 * (coverage) and their mean pinball loss, data units (null: none
 * arrived). */
static void metrics_quantiles(FILE *out, const ls_step_stats_t *s) {
  if (s->quantiles <= 0 || s->quantile == NULL) return;
  int const H = s->horizons > 1 ? s->horizons : 1;
  char n[2][32];
  fprintf(out, ",\"quantiles\":[");
  for (int k = 0; k < s->quantiles * H * s->targets; k++) {
    const ls_quantile_figures_t *const q = &s->quantile[k];
    fprintf(out,
            "%s{\"level\":%g,\"h\":%d,\"feature\":%d,\"count\":%.0f,\"coverage\":%s,"
            "\"pinball\":%s}",
            k ? "," : "", q->level, q->h, q->feature, q->count,
            json_num(n[0], sizeof n[0], "%.6g", q->count > 0 ? q->below / q->count : NAN),
            json_num(n[1], sizeof n[1], "%.9g", q->count > 0 ? q->pinball_sum / q->count : NAN));
  }
  fprintf(out, "]");
}

void report_metrics_line(FILE *f, const ls_step_stats_t *s, double time_s) {
  char loss[32], base[32], norm[32], lr[32], lag[32];
  fprintf(f,
          "{\"step\":%lld,\"time_s\":%.6f,\"windows\":%d,\"records\":%lld,\"loss\":%s,"
          "\"baseline\":%s,\"count\":%.0f,\"updated\":%d,\"nonfinite\":%d,\"grad_norm\":%s,"
          "\"lr\":%s,\"compute_s\":%.6f,\"wait_s\":%.6f,\"lag_ms\":%s,\"rejected\":{",
          (long long)s->step, time_s, s->windows, (long long)s->records,
          json_num(loss, sizeof loss, "%.9g", report_mean(s->loss_sum, s->count)),
          json_num(base, sizeof base, "%.9g", report_mean(s->baseline_sum, s->count)), s->count,
          s->updated, s->nonfinite,
          json_num(norm, sizeof norm, "%.6g",
                   s->updated     ? s->grad_norm
                   : s->nonfinite ? NAN
                                  : 0.0),
          json_num(lr, sizeof lr, "%.6g", s->updated ? (double)s->lr : 0.0), s->compute_s,
          s->wait_s, json_num(lag, sizeof lag, "%.1f", s->lag_ms));
  for (int r = 1; r < LS_REJECT__COUNT; r++)
    fprintf(f, "%s\"%s\":%lld", r > 1 ? "," : "", ls_reject2str((ls_reject_t)r),
            (long long)s->rejected[r]);
  fputc('}', f);
  metrics_targets(f, s);
  metrics_horizons(f, s);
  metrics_quantiles(f, s);
  fputs("}\n", f);
}

/* The figures per horizon (--horizon H > 1): a line per target and horizon
 * shown, its MSE in the data's units and its ratio to the last value's and
 * the seasonal naive's, over the run and its last fifth. */
static void summary_horizons(FILE *out, const ls_train_summary_t *s) {
  for (int k = 0; s->horizons > 1 && s->horizon != NULL && k < s->horizons * s->targets; k++) {
    const ls_horizon_figures_t *const a = &s->horizon[k], *const t = &s->tail_horizon[k];
    if (!ls_horizon_shown(a->h, s->horizons)) continue;
    fprintf(out,
            "horizon h=%d feature=%d name=%s count=%.0f mse_data=%.9g last_data=%.9g "
            "snaive_data=%.9g ratio_last=%.4f ratio_snaive=%.4f final_count=%.0f "
            "final_mse_data=%.9g final_last_data=%.9g final_snaive_data=%.9g "
            "final_ratio_last=%.4f final_ratio_snaive=%.4f\n",
            a->h, a->feature, s->target[k % s->targets].name, a->count,
            report_mean(a->mse_sum, a->count), report_mean(a->last_sum, a->count),
            report_mean(a->snaive_sum, a->count), a->last_sum > 0 ? a->mse_sum / a->last_sum : 0.0,
            a->snaive_sum > 0 ? a->mse_sum / a->snaive_sum : 0.0, t->count,
            report_mean(t->mse_sum, t->count), report_mean(t->last_sum, t->count),
            report_mean(t->snaive_sum, t->count), t->last_sum > 0 ? t->mse_sum / t->last_sum : 0.0,
            t->snaive_sum > 0 ? t->mse_sum / t->snaive_sum : 0.0);
  }
}

/* The quantiles' figures (--quantiles): a line per level, target and
 * horizon shown, the share of actuals at or below the forecast (coverage)
 * and the mean pinball loss, over the run and its last fifth, of the
 * quantiles as they went out: calibration=gamma (0: the head's own). */
static void summary_quantiles(FILE *out, const ls_train_summary_t *s) {
  int const H = s->horizons > 1 ? s->horizons : 1, OH = H * s->targets;
  for (int k = 0; s->quantile != NULL && k < s->quantiles * OH; k++) {
    const ls_quantile_figures_t *const a = &s->quantile[k], *const t = &s->tail_quantile[k];
    if (!ls_horizon_shown(a->h, H)) continue;
    fprintf(out,
            "quantile level=%g h=%d feature=%d name=%s calibration=%g count=%.0f coverage=%.4f "
            "pinball=%.9g final_count=%.0f final_coverage=%.4f final_pinball=%.9g\n",
            a->level, a->h, a->feature, s->target[k % s->targets].name, s->calibration_rate,
            a->count, report_mean(a->below, a->count), report_mean(a->pinball_sum, a->count),
            t->count, report_mean(t->below, t->count), report_mean(t->pinball_sum, t->count));
  }
}

void report_summary(FILE *out, const ls_train_summary_t *s) {
  /* The headline: the forecasts as they go out (data units, calibrated),
   * against the last value, the mean over the targets of their ratios. */
  double whole = 0.0, final = 0.0;
  int n = 0;
  for (int j = 0; j < s->targets; j++) {
    const ls_target_figures_t *const a = &s->target[j], *const t = &s->tail_target[j];
    if (!(a->base_sum > 0 && t->base_sum > 0)) continue;
    whole += a->mse_sum / a->base_sum, final += t->mse_sum / t->base_sum, n++;
  }
  fprintf(out, "forecast final_ratio=%.4f ratio=%.4f targets=%d units=data\n",
          n > 0 ? final / n : 0.0, n > 0 ? whole / n : 0.0, n);
  fprintf(out,
          "loss units=normalised mse=%.6g baseline=%.6g final_mse=%.6g final_baseline=%.6g "
          "final_count=%.0f final_ratio=%.4f final_from_ms=%lld\n",
          report_mean(s->loss_sum, s->count), report_mean(s->baseline_sum, s->count),
          report_mean(s->tail_loss_sum, s->tail_count),
          report_mean(s->tail_baseline_sum, s->tail_count), s->tail_count,
          s->tail_baseline_sum > 0 ? s->tail_loss_sum / s->tail_baseline_sum : 0.0,
          (long long)s->tail_from_ms);
  for (int j = 0; j < s->targets; j++) {
    const ls_target_figures_t *const a = &s->target[j], *const t = &s->tail_target[j];
    fprintf(out,
            "target feature=%d name=%s count=%.0f mse=%.6g baseline=%.6g mse_data=%.9g "
            "baseline_data=%.9g ratio=%.4f final_count=%.0f final_mse=%.6g final_baseline=%.6g "
            "final_mse_data=%.9g final_baseline_data=%.9g final_ratio=%.4f\n",
            a->feature, a->name, a->count, report_mean(a->loss_sum, a->count),
            report_mean(a->baseline_sum, a->count), report_mean(a->mse_sum, a->count),
            report_mean(a->base_sum, a->count), a->base_sum > 0 ? a->mse_sum / a->base_sum : 0.0,
            t->count, report_mean(t->loss_sum, t->count), report_mean(t->baseline_sum, t->count),
            report_mean(t->mse_sum, t->count), report_mean(t->base_sum, t->count),
            t->base_sum > 0 ? t->mse_sum / t->base_sum : 0.0);
  }
  summary_horizons(out, s);
  summary_quantiles(out, s);
}
