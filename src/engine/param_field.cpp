#include "vlkv/param_field.h"

#include <cstdio>

namespace vlkv {
namespace {

// Whole numbers in full (1099511627776), others to float precision (0.95, 1.5e-05).
std::string number_text(double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string param_range_text(const ParamField& p) {
  const bool has_min = std::isfinite(p.min), has_max = std::isfinite(p.max);
  if (has_min && has_max)
    return "in " + std::string(p.min_open ? "(" : "[") + number_text(p.min) + ", " + number_text(p.max) + "]";
  if (has_min) return (p.min_open ? "> " : ">= ") + number_text(p.min);
  if (has_max) return "<= " + number_text(p.max);
  return "a finite number";
}

Status check_param(const ParamField& p, double value) {
  const bool ok = std::isfinite(value) && (p.min_open ? value > p.min : value >= p.min) && value <= p.max;
  if (ok) return Status::ok();
  return invalid_argument(std::string(p.json) + " must be " + param_range_text(p) + ", got " + number_text(value));
}

}  // namespace vlkv
