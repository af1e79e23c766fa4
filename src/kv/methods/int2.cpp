// Method "int2": K and V 2-bit per token, f16 scale + min per 32 channels (3 bits/element
// at g=32, 2.25 at g=128): the plain round-to-nearest baseline the 2-bit methods
// (KIVI and the other low-bit methods) are compared against at equal stored bits.
#include "kv/methods/int_token_method.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(int2, int_token_method_info(2));

}  // namespace vlkv
