// The merge step both BPE and SentencePiece tokenizers repeat: symbols in a linked list
// (prev / next indices, -1 at the ends; n bytes, 0 once merged away), the best pair taken
// from a queue, its right symbol folded into the left.
#pragma once

#include <vector>

namespace vlkv {

// Folds symbols[right] into symbols[left] (its right neighbour) and offers the two new
// neighbour pairs, (left's prev, left) and (left, left's new next), to add_pair.
template <class Symbol, class AddPair>
void merge_symbol_pair(std::vector<Symbol>& symbols, int left, int right, AddPair&& add_pair) {
  Symbol& l = symbols[left];
  Symbol& r = symbols[right];
  l.n += r.n;
  r.n = 0;
  l.next = r.next;
  if (r.next >= 0) symbols[r.next].prev = left;
  add_pair(l.prev, left);
  add_pair(left, l.next);
}

}  // namespace vlkv
