/* SPDX-License-Identifier: MIT */
/*
 * tuna report --html: axes of the inline SVG charts (see svg_axis.h): a time
 * axis with 1-2-5 ticks and units, and decade ticks of a log axis.
 */
#include "svg_axis.h"

#include <math.h>

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about n ticks over span. */
static double nice_step(double span, int n)
{
    double raw = span / (n > 0 ? n : 1), p = pow(10, floor(log10(raw))), m = raw / p;

    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

void svg_time_label(char *buf, size_t size, double us, double step_us)
{
    if (step_us >= 1e6)
        snprintf(buf, size, "%.*f s", step_us >= 1e7 ? 0 : 1, us / 1e6);
    else if (step_us >= 1e3)
        snprintf(buf, size, "%.*f ms", step_us >= 1e4 ? 0 : 1, us / 1e3);
    else
        snprintf(buf, size, "%.*f us", step_us >= 10 ? 0 : 1, us);
}

void svg_time_axis(FILE *f, double x0, double width, double y, double t0_us, double span_us,
                   double origin_us)
{
    double step = nice_step(span_us, 10);
    double first = ceil((t0_us - origin_us) / step) * step;
    char lab[32];

    fprintf(f, "<g class=\"time-axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#333\"/>\n",
            x0, y, x0 + width, y);
    for (double t = first; t <= t0_us - origin_us + span_us + step * 1e-9; t += step) {
        double x = x0 + (t + origin_us - t0_us) / span_us * width;

        svg_time_label(lab, sizeof(lab), t, step);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%s</text>\n",
                x, y, x, y + 4, x, y + 15, lab);
    }
    fprintf(f, "</g>\n");
}

void svg_log_ticks(FILE *f, bool vertical, double lo, double hi, double pos, double a, double b,
                   const char *unit)
{
    for (int e = (int)ceil(lo - 1e-9); e <= (int)floor(hi + 1e-9); e++) {
        double t = a + (e - lo) / (hi - lo) * (b - a);
        char lab[32];

        if (e >= 0 && e <= 5)
            snprintf(lab, sizeof(lab), "%.0f%s", pow(10, e), unit);
        else
            snprintf(lab, sizeof(lab), "1e%d%s", e, unit);
        if (vertical)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s"
                       "</text>\n",
                    pos - 4, t, pos, t, pos - 6, t + 3, lab);
        else
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%s"
                       "</text>\n",
                    t, pos, t, pos + 4, t, pos + 15, lab);
    }
}
