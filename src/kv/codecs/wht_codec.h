// The Walsh-Hadamard rotation as a wrapper around any codec: rows are stored as y = x H
// (H the normalized WHT over head_dim: orthonormal, self-inverse, wht.h) by the inner
// codec, and decode() returns x^ = y^ H. The fused ops stay in the rotated basis:
// scores() expects q H (transform_query) and accumulate() adds p y^, to which attention
// applies H once at the end of the step (untransform_output). Every rotated codec shares
// one transform id, so attention rotates each query tile once for all of them.
// The inner codec states the error bound back in x (it knows its grouping) and refuses
// head_dims the rotation cannot take; the wrapper checks them again for any other codec.
#pragma once

#include <memory>

#include "kv/codec.h"

namespace vlkv {

// Largest head_dim a rotated codec accepts: the rotated error bounds are stated up to it.
constexpr int kMaxWhtHeadDim = 256;

// name() is "wht_" + inner->name().
std::shared_ptr<const Codec> make_wht_codec(std::shared_ptr<const Codec> inner);

}  // namespace vlkv
