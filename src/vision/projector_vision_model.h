// What every VisionModel built around one projector class repeats: it owns the projector,
// reports its type and output size, and is made from the mmproj by Projector::load. Each model keeps
// its own token layout and encode order.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "vision/vision_model.h"

namespace vlkv {

template <class Projector>
class ProjectorVisionModel : public VisionModel {
 public:
  explicit ProjectorVisionModel(Projector p) : p_(std::move(p)) {}
  // The mmproj's clip.projector_type, which Projector::load checked.
  std::string_view projector_type() const override { return p_.hparams().projector_type; }
  int64_t n_embd_out() const override { return p_.n_embd_out(); }

 protected:
  Projector p_;
};

// preprocess for a projector that makes one tensor of an image (no tiles).
inline Result<std::vector<ImageTensor>> one_image_tensor(Result<ImageTensor> tensor) {
  if (!tensor.is_ok()) return tensor.status();
  std::vector<ImageTensor> out;
  out.push_back(std::move(tensor).value());
  return out;
}

// The registry's factory for Model (a ProjectorVisionModel<Projector>).
template <class Model, class Projector>
Result<std::unique_ptr<VisionModel>> load_projector_model(const GgufFile& g) {
  VLKV_ASSIGN_OR_RETURN(Projector p, Projector::load(g));
  return std::unique_ptr<VisionModel>(new Model(std::move(p)));
}

}  // namespace vlkv
