/* Inline SVG for the HTML report (html.c): scales with readable ticks, axes, text, escaping. The
 * report draws every chart itself, so the page needs no script library and opens offline. */
#ifndef ALMA_REPORT_SVG_H
#define ALMA_REPORT_SVG_H

#include <stdio.h>

/* A map from a data interval [d0, d1] to pixels [r0, r1], linear or log10 (d0 > 0 then). */
typedef struct alma__scale {
  double d0, d1, r0, r1;
  int log;
} alma__scale;

/* Widens a degenerate or empty interval so that the map is defined; log needs d0 > 0. */
void alma__scale_init(alma__scale *s, double d0, double d1, double r0, double r1, int log);
double alma__scale_map(const alma__scale *s, double v);
/* Tick values inside the domain: 1-2-5 steps (linear), powers of ten and their 2 and 5 multiples
 * when the domain spans few decades (log). Returns how many (at most max). */
int alma__scale_ticks(const alma__scale *s, double *ticks, int max);

/* Text for HTML and SVG alike: & < > " ' escaped, control characters as U+FFFD. NULL as "". */
void alma__html_escape(FILE *f, const char *s);
/* A number with 4 significant digits, without exponent from 1e-3 to 1e7 ("0.0123", "12300"); "-"
 * for NaN. */
const char *alma__num_str(double v, char *buf, size_t n);

/* <svg class="chart" data-chart=KIND viewBox="0 0 w h" role="img"> with its title; marks drawn in it
 * carry class "mark" (the tests count them). */
void alma__svg_begin(FILE *f, int w, int h, const char *kind, const char *title);
void alma__svg_end(FILE *f);
/* The x axis along y = y0 (ticks below) and the y axis along x = x0 (ticks left), with grid lines
 * across the plot to the other edge, and their labels. */
void alma__svg_axis_x(FILE *f, const alma__scale *s, double y0, double grid_to, const char *label);
void alma__svg_axis_y(FILE *f, const alma__scale *s, double x0, double grid_to, const char *label);
/* A text element (escaped); anchor "start", "middle" or "end"; cls may be NULL. */
void alma__svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *text);

/* The i-th colour of a palette that stays apart for colour-blind readers (Okabe-Ito, then more). */
const char *alma__svg_color(int i);

#endif
