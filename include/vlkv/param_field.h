// One row of a parameter table (DESIGN.md: one table per parameter struct, visited as
// gemma.cpp's configs are): a field's command-line flag, JSON name, help and valid range.
// The CLI, the server's JSON and the benchmark output all read the same rows.
#pragma once

#include <cmath>
#include <string>

#include "vlkv/status.h"

namespace vlkv {

struct ParamField {
  const char* flags = "";  // CLI11 option names, e.g. "-t,--threads" ("" : no flag)
  const char* json = "";   // JSON key, e.g. "n_threads"; also the name in error messages
  const char* help = "";
  // Valid values of a number: [min, max], or (min, max] when min_open. Infinite bounds are
  // open ends; a number field is always refused when NaN or infinite.
  double min = -HUGE_VAL;
  double max = HUGE_VAL;
  bool min_open = false;
};

// The row's range as text: "in [0, 1024]", "in (0, 1]", ">= 0", "> 0" or "a finite number".
std::string param_range_text(const ParamField& p);

// InvalidArgument "<json> must be <range>, got <value>" when value is outside the row's
// range: the one message the CLI and the server give for a bad value.
Status check_param(const ParamField& p, double value);

}  // namespace vlkv
