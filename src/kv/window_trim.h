// Sliding-window layers keep only their window: frees the pages of one (sequence, layer)
// whose tokens every later query masks. Generic over methods: any segment, any codec, any
// storage order (Method::stored_positions), except segments the method reads back.
#pragma once

#include <cstdint>

#include "kv/layer_editor.h"

namespace vlkv {

class Method;

// next_pos: the sequence's next position p (every later query is at >= p); a token at
// position pk is out of a window W when p - pk >= W. v_window applies to V streams (and to
// K streams when k_window equals it), k_window to K streams (larger where later layers read
// this layer's keys: Q Cache); 0 = keep everything. A page goes only when it is full (no
// later append writes into it) and every token of the codec blocks it overlaps, in both
// streams of its segment (whole units of lcm(tokens_per_block)), is out: attention never
// needs a freed page, and a page shared with a token still in the window stays. Segments
// marked reread (staging windows a method folds) keep every page.
void free_out_of_window(LayerEditor& ed, const Method& method, int64_t next_pos, int64_t v_window, int64_t k_window);

}  // namespace vlkv
