// classify.c through the C++ wrapper: loads a .qfm, feeds every input a
// constant 0.5 (symbolic dims set to 1), runs, and prints the first outputs.
#include <cstdio>
#include <vector>

#include "qfold/qfold.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s model.qfm\n", argv[0]);
    return 2;
  }
  try {
    qfold::api::Model model = qfold::api::Model::LoadFile(argv[1]);
    qfold::api::Session session(model);
    for (const qfold::api::TensorInfo& in : model.inputs()) {
      std::vector<int64_t> dims = in.dims;
      size_t n = 1;
      for (int64_t& d : dims) n *= size_t(d = d < 0 ? 1 : d);
      session.SetInput(in.name, dims, std::vector<float>(n, 0.5f));
    }
    session.Run();
    for (const qfold::api::TensorInfo& info : model.outputs()) {
      qfold::api::Output out = session.GetOutput(info.name);
      std::printf("%s:", info.name.c_str());
      for (int64_t k = 0; k < out.num_elements() && k < 5; ++k)
        std::printf(" %.6g", out.data<float>()[k]);
      std::printf("\n");
    }
  } catch (const qfold::api::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", qfold_status_string(e.code()), e.what());
    return 1;
  }
  return 0;
}
