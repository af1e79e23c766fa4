// Method "f16": K and V stored as IEEE halves (the uncompressed baseline, 16 bits/element).
#include "kv/method_registry.h"
#include "kv/methods/single_codec.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(f16, MethodInfo{"f16", "K and V as IEEE halves (baseline, 16 bits/element)", {},
                                        [](const Spec&, const KvGeometry& g) {
                                          return SingleCodecMethod::create("f16", "f16", g);
                                        }});

}  // namespace vlkv
