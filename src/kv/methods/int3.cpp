// Method "int3": K and V 3-bit per token, f16 scale + min per 32 channels (4 bits/element
// at g=32, 3.25 at g=128): the plain round-to-nearest baseline at the bits of 3-bit methods.
#include "kv/methods/int_token_method.h"

namespace vlkv {

VLKV_REGISTER_KV_METHOD(int3, int_token_method_info(3));

}  // namespace vlkv
