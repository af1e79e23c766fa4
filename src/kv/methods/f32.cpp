// Method "f32": K and V stored as 32-bit floats (lossless reference).
#include "kv/method_registry.h"
#include "kv/methods/single_codec.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(f32, MethodInfo{"f32", "K and V as 32-bit floats (lossless reference, 32 bits/element)", {},
                                        [](const Spec&, const KvGeometry& g) {
                                          return SingleCodecMethod::create("f32", "f32", g);
                                        }});

}  // namespace vlkv
