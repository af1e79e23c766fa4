// Stored bits per K/V element of a method that keeps K with one codec and V with another:
// the mean of the two (each at the head's dimension, metadata included).
#pragma once

#include "kv/codec.h"

namespace vlkv {

inline double pair_bits_per_element(const Codec& k, const Codec& v, int head_dim) {
  return 0.5 * (k.bits_per_element(head_dim) + v.bits_per_element(head_dim));
}

}  // namespace vlkv
