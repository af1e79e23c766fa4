// A VidKV codec parameter that takes one of a few names (fft=none|real|complex,
// fit=mean|scale|opt): parsed with the list in the error, and named back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "vlkv/status.h"

namespace vlkv {

template <class E>
struct Choice {
  const char* name;
  E value;
};

template <class E, size_t N>
Result<E> parse_choice(std::string_view text, std::string_view codec, const char* key, const Choice<E> (&choices)[N]) {
  std::string names;
  for (const Choice<E>& c : choices) {
    if (text == c.name) return c.value;
    names += names.empty() ? "" : ", ";
    names += c.name;
  }
  std::string msg = "'";  // built by appends: GCC 12 warns (-Wrestrict) on "'" + std::string
  msg += codec;
  msg += "': ";
  msg += key;
  msg += "=";
  msg += text;
  msg += " is not one of ";
  msg += names;
  return invalid_argument(std::move(msg));
}

// The value's name; the first choice's for a value not in the list.
template <class E, size_t N>
const char* choice_name(E value, const Choice<E> (&choices)[N]) {
  for (const Choice<E>& c : choices)
    if (c.value == value) return c.name;
  return choices[0].name;
}

}  // namespace vlkv
