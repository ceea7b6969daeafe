/* SPDX-License-Identifier: MIT */
/*
 * svg.cpp - write a sim_plot as a standalone SVG 1.1 file: no library,
 * so the tool depends on nothing beyond SimGrid.
 */
#include "svg.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

static const char *const colour[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
	"#ff7f0e", "#8c564b", "#e377c2", "#17becf",
};

/* Plot area, in SVG user units */
enum { W = 640, H = 420, L = 70, R = 190, T = 40, B = 55 };

struct range {
	double lo, hi;
};

/* A "nice" step (1, 2 or 5 x 10^n) giving about @n ticks over @r */
static double tick_step(range r, int n)
{
	double raw = (r.hi - r.lo) / n;
	double mag = std::pow(10, std::floor(std::log10(raw)));
	double f = raw / mag;

	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static range data_range(const sim_plot &p, bool x)
{
	range r = { INFINITY, -INFINITY };

	for (const sim_series &s : p.series)
		for (double v : x ? s.x : s.y) {
			r.lo = std::min(r.lo, v);
			r.hi = std::max(r.hi, v);
		}
	if (!(r.lo <= r.hi))
		r = { 0, 1 };
	if (r.hi - r.lo < 1e-12) {
		r.lo -= 0.5;
		r.hi += 0.5;
	}
	/* widen to whole ticks */
	double st = tick_step(r, 5);

	r.lo = std::floor(r.lo / st) * st;
	r.hi = std::ceil(r.hi / st) * st;
	return r;
}

static void axes(FILE *f, const sim_plot &p, range xr, range yr)
{
	double xs = tick_step(xr, 5), ys = tick_step(yr, 5);
	int pw = W - L - R, ph = H - T - B;

	fprintf(f,
		"<rect x='%d' y='%d' width='%d' height='%d' "
		"fill='none' stroke='#000'/>\n",
		L, T, pw, ph);
	for (double v = xr.lo; v <= xr.hi + xs / 2; v += xs) {
		double px = L + (v - xr.lo) / (xr.hi - xr.lo) * pw;

		fprintf(f,
			"<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' "
			"stroke='#ccc'/>\n",
			px, T, px, T + ph);
		fprintf(f,
			"<text x='%.1f' y='%d' text-anchor='middle'>%g"
			"</text>\n",
			px, T + ph + 18, v);
	}
	for (double v = yr.lo; v <= yr.hi + ys / 2; v += ys) {
		double py = T + ph - (v - yr.lo) / (yr.hi - yr.lo) * ph;

		fprintf(f,
			"<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' "
			"stroke='#ccc'/>\n",
			L, py, L + pw, py);
		fprintf(f,
			"<text x='%d' y='%.1f' text-anchor='end'>%g</text>\n",
			L - 6, py + 4, v);
	}
	fprintf(f,
		"<text x='%d' y='24' text-anchor='middle' "
		"font-size='15'>%s</text>\n",
		(L + W - R) / 2, p.title.c_str());
	fprintf(f, "<text x='%d' y='%d' text-anchor='middle'>%s</text>\n",
		L + pw / 2, H - 15, p.xlabel.c_str());
	fprintf(f,
		"<text transform='translate(18,%d) rotate(-90)' "
		"text-anchor='middle'>%s</text>\n",
		T + ph / 2, p.ylabel.c_str());
}

static void lines(FILE *f, const sim_plot &p, range xr, range yr)
{
	int pw = W - L - R, ph = H - T - B;

	for (size_t i = 0; i < p.series.size(); i++) {
		const sim_series &s = p.series[i];
		const char *c = colour[i % (sizeof(colour) / sizeof(*colour))];

		fprintf(f,
			"<polyline fill='none' stroke='%s' "
			"stroke-width='2'%s points='",
			c, s.dashed ? " stroke-dasharray='6,4'" : "");
		for (size_t j = 0; j < s.x.size() && j < s.y.size(); j++)
			fprintf(f, "%.1f,%.1f ",
				L + (s.x[j] - xr.lo) / (xr.hi - xr.lo) * pw,
				T + ph -
					(s.y[j] - yr.lo) / (yr.hi - yr.lo) *
						ph);
		fprintf(f, "'/>\n");
		for (size_t j = 0;
		     !s.dashed && j < s.x.size() && j < s.y.size(); j++)
			fprintf(f,
				"<circle cx='%.1f' cy='%.1f' r='3' "
				"fill='%s'/>\n",
				L + (s.x[j] - xr.lo) / (xr.hi - xr.lo) * pw,
				T + ph -
					(s.y[j] - yr.lo) / (yr.hi - yr.lo) * ph,
				c);
		/* the legend, right of the plot */
		int ly = T + 10 + 20 * (int)i;

		fprintf(f,
			"<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s' "
			"stroke-width='2'%s/>\n",
			W - R + 12, ly, W - R + 36, ly, c,
			s.dashed ? " stroke-dasharray='6,4'" : "");
		fprintf(f, "<text x='%d' y='%d'>%s</text>\n", W - R + 42,
			ly + 4, s.name.c_str());
	}
}

int sim_svg_write(const std::string &path, const sim_plot &p)
{
	FILE *f = fopen(path.c_str(), "w");
	range xr = data_range(p, true), yr = data_range(p, false);
	int err = 0;

	if (!f)
		return -errno;
	fprintf(f,
		"<?xml version='1.0' encoding='UTF-8'?>\n"
		"<svg xmlns='http://www.w3.org/2000/svg' version='1.1' "
		"width='%d' height='%d' viewBox='0 0 %d %d' "
		"font-family='sans-serif' font-size='12'>\n"
		"<rect width='100%%' height='100%%' fill='#fff'/>\n",
		W, H, W, H);
	axes(f, p, xr, yr);
	lines(f, p, xr, yr);
	fprintf(f, "</svg>\n");
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}
