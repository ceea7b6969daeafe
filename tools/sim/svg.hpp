/* SPDX-License-Identifier: MIT */
/*
 * svg.hpp - a line plot written as SVG by hand: axes, ticks, a legend.
 */
#ifndef R2CC_SIM_SVG_HPP
#define R2CC_SIM_SVG_HPP

#include <string>
#include <vector>

struct sim_series {
	std::string name;
	std::vector<double> x, y;
	bool dashed; /* a closed form rather than a simulation */
};

struct sim_plot {
	std::string title, xlabel, ylabel;
	std::vector<sim_series> series;
};

/* Return: 0, or -errno if @path cannot be written */
int sim_svg_write(const std::string &path, const sim_plot &p);

#endif
