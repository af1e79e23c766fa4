// Method "int4": K and V 4-bit per token, f16 scale + min per 32 channels (5 bits/element
// at g=32, 4.5 at g=64; llama.cpp's q4_0 costs 4.5 with a symmetric scale only).
#include "kv/methods/int_token_method.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(int4, int_token_method_info(4));

}  // namespace vlkv
