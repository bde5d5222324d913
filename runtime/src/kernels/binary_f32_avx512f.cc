// AVX-512F float binary kernels (binary_f32.h): 16 lanes, tails through masks.
#include <immintrin.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_f32_impl.h"
#include "kernels/vec_f32_avx512f.h"


namespace qfold {
namespace kernels {
namespace {

struct V16 : F32x16 {
  static M Part(int m) { return M((1u << m) - 1u); }
  static F LoadPart(const float* p, int m) { return _mm512_maskz_loadu_ps(Part(m), p); }
  static void StorePart(float* p, F v, int m) { _mm512_mask_storeu_ps(p, Part(m), v); }
};

}  // namespace

extern const BinaryF32Kernels kBinaryF32Avx512f;
const BinaryF32Kernels kBinaryF32Avx512f = binary_f32::Make<V16>("avx512f");

}  // namespace kernels
}  // namespace qfold
