// Method "int8": K and V 8-bit per token, f16 scale + min per 32 channels (9 bits/element;
// llama.cpp's q8_0 costs 8.5 with a symmetric scale only).
#include "kv/methods/int_token_method.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(int8, int_token_method_info(8));

}  // namespace vlkv
