/* Inline SVG helpers of the HTML report (svg.h). */
#include "report/svg.h"

#include <math.h>
#include <string.h>

void alma__scale_init(alma__scale *s, double d0, double d1, double r0, double r1, int log) {
  if (!isfinite(d0) || !isfinite(d1)) d0 = 0, d1 = 1;
  if (d0 > d1) {
    double t = d0;
    d0 = d1;
    d1 = t;
  }
  if (log && !(d0 > 0)) log = 0;
  if (d1 - d0 <= fabs(d1) * 1e-9) {  /* one value: a window around it */
    if (log) d0 /= 2, d1 *= 2;
    else if (d1 == 0) d0 = -1, d1 = 1;
    else d0 -= fabs(d1) * 0.1, d1 += fabs(d1) * 0.1;
  }
  *s = (alma__scale){d0, d1, r0, r1, log};
}

double alma__scale_map(const alma__scale *s, double v) {
  double t;
  if (s->log) t = v > 0 ? (log10(v) - log10(s->d0)) / (log10(s->d1) - log10(s->d0)) : 0;
  else t = (v - s->d0) / (s->d1 - s->d0);
  return s->r0 + t * (s->r1 - s->r0);
}

int alma__scale_ticks(const alma__scale *s, double *ticks, int max) {
  int n = 0;
  if (s->log) {
    double decades = log10(s->d1) - log10(s->d0);
    static const double steps_few[] = {1, 2, 5}, steps_one[] = {1};
    const double *steps = decades < 3 ? steps_few : steps_one;
    int ns = decades < 3 ? 3 : 1;
    for (double p = pow(10, floor(log10(s->d0))); p <= s->d1 * 1.0000001 && n < max; p *= 10)
      for (int i = 0; i < ns && n < max; i++) {
        double v = p * steps[i];
        if (v >= s->d0 * 0.9999999 && v <= s->d1 * 1.0000001) ticks[n++] = v;
      }
    return n;
  }
  double raw = (s->d1 - s->d0) / 5, mag = pow(10, floor(log10(raw))), step = mag;
  if (raw / mag >= 5) step = 5 * mag;
  else if (raw / mag >= 2) step = 2 * mag;
  for (double v = ceil(s->d0 / step) * step; v <= s->d1 + step * 1e-9 && n < max; v += step)
    ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
  return n;
}

void alma__html_escape(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs("&#39;", f); break;
      default:
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) fputs("\xEF\xBF\xBD", f);
        else fputc(*p, f);
    }
  }
}

const char *alma__num_str(double v, char *buf, size_t n) {
  if (!isfinite(v)) snprintf(buf, n, "-");
  else if (v != 0 && (fabs(v) < 1e-3 || fabs(v) >= 1e7)) snprintf(buf, n, "%.3g", v);
  else if (fabs(v) >= 1e4) snprintf(buf, n, "%.0f", v);
  else snprintf(buf, n, "%.4g", v);
  return buf;
}

void alma__svg_begin(FILE *f, int w, int h, const char *kind, const char *title) {
  fprintf(f, "<svg class=\"chart\" data-chart=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" role=\"img\" "
          "xmlns=\"http://www.w3.org/2000/svg\"><title>", kind, w, h, w);
  alma__html_escape(f, title);
  fputs("</title>\n", f);
}

void alma__svg_end(FILE *f) { fputs("</svg>\n", f); }

void alma__svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *text) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"", x, y, anchor);
  if (cls) fprintf(f, " class=\"%s\"", cls);
  fputc('>', f);
  alma__html_escape(f, text);
  fputs("</text>\n", f);
}

/* A tick's label: as many decimals as the step needs (0.9995, 0.9996, ... not 1, 1, ...). */
static const char *tick_str(const alma__scale *s, const double *t, int n, int i, char *buf, size_t bn) {
  double step = n >= 2 ? t[1] - t[0] : 0;
  if (s->log || !(step > 0) || step >= 1 || fabs(t[i]) >= 1e7) return alma__num_str(t[i], buf, bn);
  int dec = (int)ceil(-log10(step) - 1e-9);
  snprintf(buf, bn, "%.*f", dec > 12 ? 12 : dec, t[i]);
  return buf;
}

void alma__svg_axis_x(FILE *f, const alma__scale *s, double y0, double grid_to, const char *label) {
  double t[64];
  char b[32];
  int n = alma__scale_ticks(s, t, 64);
  fprintf(f, "<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", s->r0, y0, s->r1, y0);
  for (int i = 0; i < n; i++) {
    double x = alma__scale_map(s, t[i]);
    fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, grid_to, x, y0);
    alma__svg_text(f, x, y0 + 14, "middle", NULL, tick_str(s, t, n, i, b, sizeof b));
  }
  if (label) alma__svg_text(f, (s->r0 + s->r1) / 2, y0 + 30, "middle", "label", label);
  fputs("</g>\n", f);
}

void alma__svg_axis_y(FILE *f, const alma__scale *s, double x0, double grid_to, const char *label) {
  double t[64];
  char b[32];
  int n = alma__scale_ticks(s, t, 64);
  fprintf(f, "<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, s->r0, x0, s->r1);
  for (int i = 0; i < n; i++) {
    double y = alma__scale_map(s, t[i]);
    fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x0, y, grid_to, y);
    alma__svg_text(f, x0 - 5, y + 4, "end", NULL, tick_str(s, t, n, i, b, sizeof b));
  }
  if (label) {
    fprintf(f, "<text class=\"label\" text-anchor=\"middle\" transform=\"translate(%.1f %.1f) rotate(-90)\">", x0 - 72,
            (s->r0 + s->r1) / 2);
    alma__html_escape(f, label);
    fputs("</text>\n", f);
  }
  fputs("</g>\n", f);
}

const char *alma__svg_color(int i) {
  static const char *pal[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
                              "#7F3C8D", "#11A579", "#3969AC", "#F2B701", "#E73F74", "#80BA5A", "#E68310", "#008695"};
  return pal[(i < 0 ? -i : i) % (int)(sizeof pal / sizeof pal[0])];
}
