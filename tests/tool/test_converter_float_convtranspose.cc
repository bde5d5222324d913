// The float ConvTranspose whose kernel equals its stride becomes a 1x1 Conv
// and DepthToSpace (converter/passes/lower_conv_transpose.cc,
// LowerFloatConvTranspose), its fused activation moved to the Conv. Both the
// lowered model and the unfused one (ConvTranspose kept) are checked against
// the definition computed here: each input pixel writes its own k x k block.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;

void RunCase(int64_t c, int64_t m, int64_t k, int64_t h, int64_t wd, bool bias, bool relu,
             uint32_t seed) {
  CAPTURE(c);
  CAPTURE(m);
  CAPTURE(k);
  CAPTURE(bias);
  CAPTURE(relu);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(c * h * wd)), w(static_cast<size_t>(c * m * k * k)),
      b(static_cast<size_t>(m));
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  const int64_t oh = h * k, ow = wd * k;

  TempDir dir;
  OnnxBuilder ob(17);
  ob.Input("x", kF32, {1, c, h, wd});
  ob.Output("y", kF32, {1, m, oh, ow});
  ob.InitFloat("w", {c, m, k, k}, w);
  std::vector<std::string> ins = {"x", "w"};
  if (bias) {
    ob.InitFloat("b", {m}, b);
    ins.push_back("b");
  }
  auto* ct = ob.Node("ConvTranspose", ins, {relu ? "ct" : "y"}, "convt0");
  OnnxBuilder::AttrInts(ct, "strides", {k, k});
  OnnxBuilder::AttrInts(ct, "kernel_shape", {k, k});
  if (relu) ob.Node("Relu", {"ct"}, {"y"}, "relu0");
  const std::string path = ob.Write(dir);

  // y[m, k i + ky, k j + kx] = b[m] + sum_c x[c, i, j] w[c, m, ky, kx].
  std::vector<float> want(static_cast<size_t>(m * oh * ow)), mag(want.size());
  for (int64_t mi = 0; mi < m; ++mi)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < wd; ++j)
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            double s = bias ? b[size_t(mi)] : 0.0, a = std::fabs(s);
            for (int64_t ci = 0; ci < c; ++ci) {
              const double p = double(x[size_t((ci * h + i) * wd + j)]) *
                               w[size_t(((ci * m + mi) * k + ky) * k + kx)];
              s += p;
              a += std::fabs(p);
            }
            const size_t o = size_t((mi * oh + k * i + ky) * ow + k * j + kx);
            want[o] = float(relu && s < 0 ? 0.0 : s);
            mag[o] = float(a);
          }

  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    ConvertOptions opts;
    opts.fuse = fuse;
    Converted cv;
    Status st = ConvertAndOpen(path, opts, &cv);
    REQUIRE_MESSAGE(st.ok(), st.message());
    if (fuse) {
      CHECK(CountOps(cv.graph, "ConvTranspose") == 0);
      CHECK(CountOps(cv.graph, "DepthToSpace") == 1);
      CHECK(CountOps(cv.graph, "Relu") == 0);
      // Only the model's NCHW input and output are transposed: the Conv and
      // DepthToSpace between them run channels-last (a Conv of at most 4
      // channels reads the NCHW input itself: FuseConvInputTranspose).
      CHECK(CountOps(cv.graph, "Transpose") == (c <= 4 ? 1u : 2u));
    } else {
      CHECK(CountOps(cv.graph, "ConvTranspose") == 1);
    }
    SetFloatInput(cv.session.get(), "x", {1, c, h, wd}, x);
    st = cv.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    const std::vector<float> got = FloatOutput(*cv.session, "y", {1, m, oh, ow});
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1.f + mag[i]))) {
        if (bad++ == 0) first = i;
      }
    }
    CHECK_MESSAGE(bad == 0, bad << " elements off, first " << first << ": got " << got[first]
                                << " want " << want[first]);
  }
}

TEST_CASE("convert: float ConvTranspose with kernel = stride -> Conv 1x1 + DepthToSpace") {
  RunCase(5, 3, 2, 6, 7, true, false, 1);
  RunCase(24, 24, 2, 9, 8, true, true, 2);
  RunCase(16, 8, 3, 5, 5, false, true, 3);
  RunCase(1, 1, 2, 4, 4, true, false, 4);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
