// `vlkv eval --vqa` per length and per question type: what each method scored on the items
// of one video length (n_frames) or one question type, so that accuracy can be drawn as the
// video grows (the VidKV / ZipVL papers' tables) and a loss traced to the questions it hits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/vqa_items.h"
#include "vlkv/status.h"

namespace vlkv::cli {

// What one method did on one item.
struct VqaItemScore {
  bool correct = false;
  double kl_sum = 0;            // over the f16 answer's positions, teacher-forced
  int64_t n_positions = 0, top1 = 0;
  double held_bytes = 0;        // KV bytes the session held at its end
  double f16_bytes = 0;         // an f16 cache of the same tokens
  double decode_seconds = 0;    // the greedy answer's decode steps
  int64_t decode_tokens = 0;
  std::string answer;           // the method's greedy answer (leading space stripped)
};

struct VqaGroupRow {
  std::string method;
  std::string by;     // "n_frames" or "type"
  std::string group;  // its value
  int64_t n_items = 0;
  double accuracy = 0, kl_mean = 0, top1 = 0;
  double held_ratio = 0;      // held bytes / f16 bytes of the same tokens
  double held_bytes_mean = 0; // per item
  double decode_tok_s = 0;    // answer tokens per second of decode (0: none decoded)
};

// The method's rows, one per distinct value of `by` ("n_frames": ascending; "type": by name).
std::vector<VqaGroupRow> vqa_group_rows(const std::string& method, const std::string& by,
                                        const std::vector<VqaItem>& items, const std::vector<VqaItemScore>& scores);

// A methods x groups table of accuracy for the rows of one `by`, for the terminal.
std::string vqa_accuracy_matrix(const std::vector<VqaGroupRow>& rows, const std::string& by);

// breakdown.csv (every row) and accuracy_vs_frames.svg (one line per method) into dir.
Status write_vqa_breakdown(const std::string& dir, const std::string& model, const std::vector<VqaGroupRow>& rows);

// Each item's answer by every method (answers[m][i]: methods[m]'s on items[i]), for the terminal:
// a line with the item's question and expected answer, then each method's answer marked right or
// wrong, wrapped at `width` columns.
std::string vqa_answer_table(const std::vector<VqaItem>& items, const std::vector<std::string>& methods,
                             const std::vector<std::vector<std::string>>& answers, size_t width = 100);

// answers.csv into dir: one row per item and method (id, n_frames, type, question, expected, answer, correct).
Status write_vqa_answers(const std::string& dir, const std::string& model, const std::vector<VqaItem>& items,
                         const std::vector<std::string>& methods, const std::vector<std::vector<std::string>>& answers);

// The SVG alone: accuracy (%) against frames (log2 axis), one polyline per method.
std::string accuracy_vs_frames_svg(const std::vector<VqaGroupRow>& rows, const std::string& title);

}  // namespace vlkv::cli
