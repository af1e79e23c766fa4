// Q Cache calibration (lazy attention layers): Jensen–Shannon divergence between the
// attention maps of adjacent layers, grouping of layers into lazy blocks (one standard
// layer, then lazy layers that reuse its queries and keys), and the small JSON map that
// `vlkv calibrate` writes and the qcache_* methods read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "kv/token_kind.h"
#include "vlkv/status.h"

namespace vlkv::calibration {

// JS divergence (natural log, in [0, ln 2]) between two distributions over n outcomes;
// p and q are normalized here (each must have a positive sum). Terms with p_i = 0 count 0.
double jensen_shannon(const float* p, const float* q, int64_t n);

// One query head's attention maps in two layers over the same n keys, compared: JSD of the
// whole maps, and of their parts on the visual keys (kinds[j] == kVisual, renormalized);
// visual < 0 when kinds is null, there are no visual keys or either map has no mass there.
struct MapJsd {
  double whole = 0, visual = -1;
};
MapJsd compare_maps(const float* p, const float* q, int64_t n, const TokenKind* kinds);

// Layer grouping: base[l] = -1 for a standard layer, else the standard layer whose q and k
// lazy layer l reuses (the nearest standard layer before it: the first layer of its block).
struct Grouping {
  std::vector<int> base;  // [n_layers]
  int n_lazy() const;
  std::vector<int> lazy_layers() const;  // ascending
  // [[standard, lazy, lazy, ...], ...]: each block is a standard layer and the lazy layers after it.
  std::vector<std::vector<int>> blocks() const;
};

// Lazy layers as given (ascending, in [1, n_layers)); InvalidArgument otherwise.
Result<Grouping> grouping_from_lazy(int n_layers, const std::vector<int>& lazy);
// Layer l >= 1 is lazy when jsd_adjacent[l - 1] (between layers l - 1 and l) < threshold.
Grouping group_by_threshold(const std::vector<double>& jsd_adjacent, double threshold);
// The k layers with the smallest adjacent JSD are lazy (ties: the earlier layer);
// k is clamped to [0, n_layers - 1].
Grouping group_by_count(const std::vector<double>& jsd_adjacent, int k);
// The fallback without calibration: layers 0, 1 and the last one standard, every other
// layer from 3 on lazy (3, 5, 7, ... up to n_layers - 2): deep layers' attention maps are
// the similar ones in the paper's measurements; fewer than 5 layers -> none lazy.
Grouping pattern_grouping(int n_layers);
// k distinct lazy layers drawn uniformly from [1, n_layers) with this seed (the paper's
// sanity baseline: as many lazy layers as a calibrated grouping, at random).
Grouping random_grouping(int n_layers, int k, uint64_t seed);

// What a calibration map says about the model it was measured on.
struct ModelIdentity {
  std::string arch;
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint64_t fingerprint = 0;  // hash of the model's tensor table (0: unknown)
};

struct CalibrationMap {
  ModelIdentity model;
  std::string criterion = "visual";           // "visual" or "whole": which JSD grouped the layers
  std::vector<double> jsd_adjacent;           // [n_layers - 1] whole maps, layers (l, l + 1)
  std::vector<double> jsd_adjacent_visual;    // [n_layers - 1] visual keys only (empty: no visual tokens)
  double threshold = -1;                      // < 0: grouped by count
  Grouping grouping;
  int64_t n_prompts = 0, n_queries = 0;       // what the JSDs averaged over

  // The JSD table the criterion names.
  const std::vector<double>& criterion_jsd() const;
};

std::string map_to_json(const CalibrationMap& map);
// InvalidArgument (naming the file) for a file that is not a vlkv Q Cache map, a broken one,
// or one measured on a model of another geometry / fingerprint than `geometry`
// (fingerprint compared when both are known).
Result<CalibrationMap> load_map(const std::string& path, const KvGeometry& geometry);
Status save_map(const std::string& path, const CalibrationMap& map);

}  // namespace vlkv::calibration
