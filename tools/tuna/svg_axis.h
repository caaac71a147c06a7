/* SPDX-License-Identifier: MIT */
/*
 * tuna report --html: axes of the inline SVG charts.
 */
#ifndef TUNA_SVG_AXIS_H
#define TUNA_SVG_AXIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* "12 ms", "1.5 s", "250 us": us with the unit the tick step calls for. */
void svg_time_label(char *buf, size_t size, double us, double step_us);

/* A horizontal time axis at y over [x0, x0 + width] showing [t0_us,
 * t0_us + span_us]; labels are times since origin_us. */
void svg_time_axis(FILE *f, double x0, double width, double y, double t0_us, double span_us,
                   double origin_us);

/* Decade ticks of a log10 axis over [lo, hi] (exponents) drawn from a to b
 * (pixels): vertical = on the y axis at x = pos, else the x axis at y = pos. */
void svg_log_ticks(FILE *f, bool vertical, double lo, double hi, double pos, double a, double b,
                   const char *unit);

#endif /* TUNA_SVG_AXIS_H */
